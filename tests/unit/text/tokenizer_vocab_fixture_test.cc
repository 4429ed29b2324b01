// Tokenizer on llama-family vocabularies other than SmolLM2's: llama.cpp's
// own vocabulary-only GGUFs of the LLaMA 2 (SentencePiece, "llama") and
// LLaMA 3 (byte-level BPE, pre-tokenizer "llama-bpe") tokenizers and Qwen2's
// ("qwen2"), fetched
// by scripts/fetch-vocab.sh. Two oracles: llama.cpp's test strings with the
// ids Hugging Face's tokenizers gives (.inp/.out next to each GGUF), and
// tests/data/vocab_golden_<fixture>.json, written by
// tests/data/make_vocab_golden.py from llama.cpp itself (ids with
// parse_special false and true, and the bytes the ids decode to). Skips
// without the fixtures.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "common/gguf/gguf_file.h"
#include "common/text/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/golden/test_model.h"
#include "tests/testing/file_contents.h"
#include "tests/testing/tokenizer_golden_entries.h"

namespace pdserve {
namespace {

struct Fixture {
  std::string name;   // vocab_golden_<name>.json
  std::string vocab;  // file under models/vocab/
  // llama.cpp ships <vocab>.inp/.out (Hugging Face's ids) for it; without
  // them its golden file holds llama.cpp's ids for those strings.
  bool has_hf_tests = true;
  // False: only the .inp/.out strings (no llama.cpp-run golden file yet).
  bool has_golden = true;
};

// A vocabulary fixture (scripts/fetch-vocab.sh) or a real model
// (scripts/fetch-model.sh), in the tree or in the cache.
std::string FixturePath(const std::string& file) {
  const char* home = std::getenv("HOME");
  for (const char* dir : {"vocab", "models"}) {
    const std::string in_tree = testing::SourceDir() + "/models/" +
                                (std::string(dir) == "vocab" ? "vocab/" : "") + file;
    if (std::filesystem::exists(in_tree)) return in_tree;
    if (home == nullptr) continue;
    const std::string cached = std::string(home) + "/.cache/pdserve/" + dir + "/" + file;
    if (std::filesystem::exists(cached)) return cached;
  }
  return "";
}

// llama.cpp's test-tokenizer-0 format: inputs separated by
// "\n__ggml_vocab_test__\n", one line of space-separated ids per input.
std::vector<std::pair<std::string, std::vector<int32_t>>> ReadVocabTests(const std::string& gguf) {
  const std::string raw = testing::FileContents(gguf + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    inputs.push_back(raw.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + sep.size();
  }
  std::ifstream out(gguf + ".out");
  std::vector<std::pair<std::string, std::vector<int32_t>>> tests;
  std::string line;
  for (size_t i = 0; i < inputs.size() && std::getline(out, line); ++i) {
    std::istringstream ids(line);
    std::vector<int32_t> expected{std::istream_iterator<int32_t>(ids), {}};
    tests.push_back({inputs[i], expected});
  }
  return tests;
}

class TokenizerVocabFixtureTest : public ::testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override {
    path_ = FixturePath(GetParam().vocab);
    if (path_.empty()) GTEST_SKIP() << GetParam().vocab << " not found; run scripts/fetch-vocab.sh";
    auto gguf = GgufFile::Open(path_);
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    auto t = Tokenizer::FromGguf(**gguf);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::move(*t);
    if (!GetParam().has_golden) return;
    std::ifstream f(testing::SourceDir() + "/tests/data/vocab_golden_" + GetParam().name + ".json");
    ASSERT_TRUE(f.good()) << "golden file missing; set PDSERVE_SOURCE_DIR";
    golden_ = nlohmann::json::parse(f);
  }

  std::string path_;
  std::unique_ptr<Tokenizer> tokenizer_;
  nlohmann::json golden_;
};

TEST_P(TokenizerVocabFixtureTest, SpecialIdsMatchLlamaCpp) {
  if (!GetParam().has_golden) GTEST_SKIP() << "no golden file for " << GetParam().vocab;
  EXPECT_EQ(tokenizer_->add_bos(), golden_.at("add_bos").get<bool>());
  EXPECT_EQ(tokenizer_->bos_id(), golden_.at("bos_id").get<int32_t>());
  EXPECT_EQ(tokenizer_->eos_id(), golden_.at("eos_id").get<int32_t>());
  EXPECT_TRUE(tokenizer_->IsEog(tokenizer_->eos_id()));
}

TEST_P(TokenizerVocabFixtureTest, LlamaCppTestStringsMatchHuggingFace) {
  if (!GetParam().has_hf_tests) GTEST_SKIP() << "no .inp/.out for " << GetParam().vocab;
  const auto tests = ReadVocabTests(path_);
  ASSERT_GE(tests.size(), 30u);
  for (const auto& [text, expected] : tests) {
    EXPECT_EQ(tokenizer_->Encode(text, /*parse_special=*/false), expected)
        << "text=\"" << absl::CEscape(text) << "\"";
  }
}

TEST_P(TokenizerVocabFixtureTest, EveryGoldenEntryMatchesLlamaCpp) {
  if (!GetParam().has_golden) GTEST_SKIP() << "no golden file for " << GetParam().vocab;
  const auto& entries = golden_.at("entries");
  ASSERT_GE(entries.size(), 150u);
  const int matched = testing::ExpectGoldenEntriesMatch(*tokenizer_, entries);
  EXPECT_EQ(matched, static_cast<int>(entries.size()));
}

INSTANTIATE_TEST_SUITE_P(LlamaFamily, TokenizerVocabFixtureTest,
                         ::testing::Values(Fixture{"llama_spm", "ggml-vocab-llama-spm.gguf"},
                                           Fixture{"llama_bpe", "ggml-vocab-llama-bpe.gguf"},
                                           // No tokenizer.ggml.pre: the "default" one.
                                           Fixture{"gpt_neox", "ggml-vocab-gpt-neox.gguf",
                                                   /*has_hf_tests=*/false},
                                           // Qwen2 (pre-tokenizer "qwen2"): Hugging Face's
                                           // ids, which llama.cpp's own test-tokenizer-0
                                           // checks it against.
                                           Fixture{"qwen2", "ggml-vocab-qwen2.gguf",
                                                   /*has_hf_tests=*/true, /*has_golden=*/false},
                                           // The real models' own vocabularies, with
                                           // llama-cpp-python 0.3.36's ids.
                                           Fixture{"gemma3", "gemma-3-270m.Q4_K_M.gguf",
                                                   /*has_hf_tests=*/false},
                                           Fixture{"qwen2_5_coder",
                                                   "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
                                                   /*has_hf_tests=*/false}),
                         [](const ::testing::TestParamInfo<Fixture>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace pdserve
