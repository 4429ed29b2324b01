// Small hand-built vocabularies for the tokenizer and detokenizer tests, so
// most behaviour is checked without the real model.
#ifndef PDSERVE_TESTS_TESTING_TOKENIZER_TEST_UTIL_H_
#define PDSERVE_TESTS_TESTING_TOKENIZER_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/text/byte_level.h"
#include "common/text/tokenizer.h"
#include "common/text/utf8.h"

namespace pdserve::tokenizer_test {

// The byte-level spelling of raw bytes (" a" -> "Ġa").
inline std::string Spell(std::string_view raw) {
  std::string out;
  for (const char c : raw) AppendUtf8(ByteToSymbol(static_cast<uint8_t>(c)), &out);
  return out;
}

inline int32_t AddToken(TokenizerVocab* v, const std::string& text,
                        TokenType type = TokenType::kNormal) {
  v->tokens.push_back(text);
  v->token_types.push_back(static_cast<int32_t>(type));
  return static_cast<int32_t>(v->tokens.size()) - 1;
}

// One NORMAL token per byte (token id == byte value), then for each merge
// {left, right} (raw text, rank = position) a token for left + right.
inline TokenizerVocab ByteVocab(
    const std::vector<std::pair<std::string, std::string>>& merges = {}) {
  TokenizerVocab v;
  v.pre = "smollm";
  for (int b = 0; b < 256; ++b) AddToken(&v, Spell(std::string(1, static_cast<char>(b))));
  for (const auto& [left, right] : merges) {
    v.merges.push_back(Spell(left) + " " + Spell(right));
    AddToken(&v, Spell(left + right));
  }
  return v;
}

}  // namespace pdserve::tokenizer_test

#endif  // PDSERVE_TESTS_TESTING_TOKENIZER_TEST_UTIL_H_
