// llama-family models other than SmolLM2, against llama.cpp: random-weight
// GGUFs (RandomModelSpec::Tiny) carrying the LLaMA 2 SentencePiece and the
// LLaMA 3 tokenizers of llama.cpp's vocabulary fixtures, with plain,
// linearly scaled and rope_freqs.weight (LLaMA 3.1) RoPE. The test writes
// each GGUF itself, checks it is byte-identical to the one
// tests/data/make_llama_family_golden.py ran llama.cpp on (sha256 in
// tests/data/llama_family_golden.json), then checks the prompt tokens
// (Tokenizer::EncodePrompt) and the greedy tokens of the serving engine.
// As in llama_cpp_golden_test, tokens may part only on one of llama.cpp's
// near ties. Skips without the vocabulary fixtures (scripts/fetch-vocab.sh).
#include <openssl/sha.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_join.h"
#include "common/model/model.h"
#include "common/model/random_model.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/golden/greedy_engine.h"
#include "tests/golden/test_model.h"

namespace pdserve {
namespace {

constexpr double kNearTie = 0.05;

std::string VocabDir() {
  const std::string in_tree = testing::SourceDir() + "/models/vocab";
  if (std::filesystem::exists(in_tree + "/ggml-vocab-llama-spm.gguf")) return in_tree;
  const char* home = std::getenv("HOME");
  const std::string cached = std::string(home != nullptr ? home : "") + "/.cache/pdserve/vocab";
  return std::filesystem::exists(cached + "/ggml-vocab-llama-spm.gguf") ? cached : "";
}

// The specs make_llama_family_golden.py asks `pdserve random-model` for.
RandomModelSpec SpecFor(const std::string& name, int seed, const std::string& vocab_dir) {
  RandomModelSpec s = RandomModelSpec::Tiny();
  s.seed = seed;
  if (name == "llama2_spm" || name == "llama2_spm_linear_rope") {
    s.vocab_from = vocab_dir + "/ggml-vocab-llama-spm.gguf";
  }
  if (name == "llama2_spm_linear_rope") s.rope_scaling_factor = 4.0f;
  if (name == "llama3_bpe" || name == "llama3_rope_freqs") {
    s.vocab_from = vocab_dir + "/ggml-vocab-llama-bpe.gguf";
  }
  if (name == "llama3_rope_freqs") {
    s.rope_freq_factors = Llama3RopeFreqFactors(s.n_embd / s.n_heads, s.rope_base);
  }
  return s;
}

std::string Sha256Hex(const std::string& bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

class LlamaFamilyGoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    vocab_dir_ = VocabDir();
    if (vocab_dir_.empty())
      GTEST_SKIP() << "vocabulary fixtures not found (scripts/fetch-vocab.sh)";
    std::ifstream f(testing::SourceDir() + "/tests/data/llama_family_golden.json");
    ASSERT_TRUE(f.good()) << "golden file missing; set PDSERVE_SOURCE_DIR";
    const nlohmann::json golden = nlohmann::json::parse(f);
    for (const auto& c : golden.at("cases")) {
      if (c.at("name") == GetParam()) case_ = c;
    }
    ASSERT_FALSE(case_.is_null()) << "no golden case " << GetParam();
    auto bytes = MakeRandomModelGguf(SpecFor(GetParam(), case_.at("seed"), vocab_dir_));
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    ASSERT_EQ(Sha256Hex(*bytes), case_.at("gguf_sha256").get<std::string>())
        << "this build writes a different GGUF than the golden data was made from; rerun "
           "tests/data/make_llama_family_golden.py";
    path_ = (std::filesystem::temp_directory_path() /
             ("pdserve_family_" + GetParam() + "_" + std::to_string(getpid()) + ".gguf"))
                .string();
    std::ofstream(path_, std::ios::binary) << *bytes;
    auto m = Model::Load(path_);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }
  void TearDown() override {
    if (!path_.empty()) std::filesystem::remove(path_);
  }

  std::string vocab_dir_;
  nlohmann::json case_;
  std::string path_;
  std::unique_ptr<Model> model_;
};

TEST_P(LlamaFamilyGoldenTest, PromptTokensMatch) {
  for (const auto& run : case_.at("runs")) {
    const std::string text = run.at("text");
    EXPECT_EQ(model_->tokenizer().EncodePrompt(text),
              run.at("prompt_tokens").get<std::vector<int32_t>>())
        << absl::CEscape(text);
  }
}

TEST_P(LlamaFamilyGoldenTest, GreedyTokensMatch) {
  for (const auto& run : case_.at("runs")) {
    const auto prompt = run.at("prompt_tokens").get<std::vector<int32_t>>();
    const auto want = run.at("output_tokens").get<std::vector<int32_t>>();
    const auto gaps = run.at("gap").get<std::vector<double>>();
    const std::vector<int32_t> got =
        testing::GreedyTokens(*model_, prompt, static_cast<int>(want.size()), 64);
    ASSERT_EQ(got.size(), want.size());
    size_t i = 0;
    while (i < want.size() && got[i] == want[i]) ++i;
    if (i == want.size()) continue;
    EXPECT_LT(gaps[i], kNearTie) << absl::CEscape(run.at("text").get<std::string>())
                                 << " diverges at step " << i << ": llama.cpp " << want[i]
                                 << ", pdserve " << got[i] << "\nours: " << absl::StrJoin(got, " ");
  }
}

INSTANTIATE_TEST_SUITE_P(Models, LlamaFamilyGoldenTest,
                         ::testing::Values("llama2_spm", "llama2_spm_linear_rope", "llama3_bpe",
                                           "llama3_rope_freqs"));

}  // namespace
}  // namespace pdserve
