// Compares Tokenizer against llama.cpp (via llama-cpp-python 0.3.7) on the
// strings in tests/data/tokenizer_golden.json, written by
// tests/data/make_tokenizer_golden.py from the same GGUF. Every entry must
// match exactly: ids for parse_special false and true, and the bytes the
// ids decode to with special tokens rendered. Skips without the model.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "common/gguf/gguf_file.h"
#include "common/text/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/golden/test_model.h"
#include "tests/testing/tokenizer_golden_entries.h"

namespace pdserve {
namespace {

class TokenizerGoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string model = testing::RealModelPath();
    if (model.empty()) GTEST_SKIP() << "SmolLM2 model not found";
    std::ifstream f(testing::SourceDir() + "/tests/data/tokenizer_golden.json");
    ASSERT_TRUE(f.good()) << "tests/data/tokenizer_golden.json missing; set PDSERVE_SOURCE_DIR";
    golden_ = nlohmann::json::parse(f);
    auto gguf = GgufFile::Open(model);
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    auto t = Tokenizer::FromGguf(**gguf);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::move(*t);
  }

  nlohmann::json golden_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(TokenizerGoldenTest, EveryEntryMatchesLlamaCpp) {
  const auto& entries = golden_.at("entries");
  ASSERT_GE(entries.size(), 120u);
  const int matched = testing::ExpectGoldenEntriesMatch(*tokenizer_, entries);
  EXPECT_EQ(matched, static_cast<int>(entries.size()));
}

// Decode inverts Encode except where llama.cpp itself drops bytes the
// vocabulary has no token for; the oracle's own decode tells which.
TEST_F(TokenizerGoldenTest, DecodeRoundTripsWhereTheOracleDoes) {
  for (const auto& e : golden_.at("entries")) {
    const std::string text = e.at("text").get<std::string>();
    if (absl::HexStringToBytes(e.at("decoded_hex").get<std::string>()) != text) continue;
    const bool parse_special = e.at("parse_special").get<bool>();
    EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode(text, parse_special), true), text)
        << absl::CEscape(text);
  }
}

}  // namespace
}  // namespace pdserve
