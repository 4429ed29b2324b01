// The check shared by the tokenizer golden tests: every entry of a golden
// file written from llama.cpp (text, parse_special, ids, decoded_hex) must
// encode to its ids, and its ids must decode (special tokens rendered) to
// its bytes.
#ifndef PDSERVE_TESTS_TESTING_TOKENIZER_GOLDEN_ENTRIES_H_
#define PDSERVE_TESTS_TESTING_TOKENIZER_GOLDEN_ENTRIES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "common/text/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pdserve::testing {

// Returns how many entries matched exactly.
inline int ExpectGoldenEntriesMatch(const Tokenizer& tokenizer, const nlohmann::json& entries) {
  int matched = 0;
  for (const auto& e : entries) {
    const std::string text = e.at("text").get<std::string>();
    const bool parse_special = e.at("parse_special").get<bool>();
    const std::vector<int32_t> expected = e.at("ids").get<std::vector<int32_t>>();
    const std::vector<int32_t> ids = tokenizer.Encode(text, parse_special);
    EXPECT_EQ(ids, expected) << "text=\"" << absl::CEscape(text)
                             << "\" parse_special=" << parse_special;
    const std::string decoded = absl::HexStringToBytes(e.at("decoded_hex").get<std::string>());
    EXPECT_EQ(tokenizer.Decode(expected, /*render_special=*/true), decoded)
        << "text=\"" << absl::CEscape(text) << "\"";
    matched += ids == expected;
  }
  return matched;
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_TESTING_TOKENIZER_GOLDEN_ENTRIES_H_
