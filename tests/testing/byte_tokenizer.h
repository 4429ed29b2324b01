// A byte-level tokenizer for router tests: token i < 256 is byte i, rendered
// through the GPT-2 byte map, and 256 is <|im_end|> (end of generation);
// enough to exercise dedup, UTF-8 holding and stop strings without a model.
#ifndef PDSERVE_TESTS_TESTING_BYTE_TOKENIZER_H_
#define PDSERVE_TESTS_TESTING_BYTE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "common/text/tokenizer.h"
#include "gtest/gtest.h"

namespace pdserve::testing {

inline constexpr int32_t kByteTokenizerEos = 256;

inline std::unique_ptr<Tokenizer> ByteTokenizer() {
  TokenizerVocab v;
  int shifted = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const char32_t cp = printable ? static_cast<char32_t>(b) : 0x100 + shifted++;
    std::string utf8;
    if (cp < 0x80) {
      utf8 = std::string(1, static_cast<char>(cp));
    } else {
      utf8 = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
    v.tokens.push_back(utf8);
    v.token_types.push_back(1);
  }
  v.tokens.push_back("<|im_end|>");
  v.token_types.push_back(3);
  v.eos_id = kByteTokenizerEos;
  auto t = Tokenizer::FromVocab(v);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_TESTING_BYTE_TOKENIZER_H_
