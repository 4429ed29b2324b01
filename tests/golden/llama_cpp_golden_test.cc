// The correctness oracle: greedy tokens of llama.cpp (llama-cpp-python
// 0.3.7, prompts evaluated one token per decode) on the same GGUF, recorded
// by tests/data/make_golden.py. For every case our first 64 greedy tokens
// must equal llama.cpp's; where they part, llama.cpp's own top-2 logits at
// that step must have been a near tie (within kNearTie), i.e. a
// rounding-order difference, not a bug. On AVX512 CPUs our logits are
// llama.cpp's bit for bit (llama_numerics.h), so no case should part.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>

#include "absl/strings/str_join.h"
#include "common/cpu_model_runner.h"
#include "common/engine.h"
#include "common/llama_numerics.h"
#include "common/model.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/golden/greedy_engine.h"
#include "tests/golden/test_model.h"

namespace pdserve {
namespace {

constexpr double kNearTie = 0.05;

class LlamaCppGoldenTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = testing::RealModelPath();
    if (path.empty()) return;
    auto m = Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = m->release();
    std::ifstream f(testing::SourceDir() + "/tests/data/golden_greedy.json");
    ASSERT_TRUE(f.good());
    golden_ = new nlohmann::json(nlohmann::json::parse(f));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete golden_;
  }
  void SetUp() override {
    if (model_ == nullptr) GTEST_SKIP() << "real model not found (run scripts/fetch-model.sh)";
  }

  // Greedy tokens for `prompt` through the serving engine.
  std::vector<int32_t> Generate(const std::vector<int32_t>& prompt, int n) {
    return testing::GreedyTokens(*model_, prompt, n);
  }

  static Model* model_;
  static nlohmann::json* golden_;
};

Model* LlamaCppGoldenTest::model_ = nullptr;
nlohmann::json* LlamaCppGoldenTest::golden_ = nullptr;

TEST_F(LlamaCppGoldenTest, HasEnoughCases) { EXPECT_GE((*golden_)["cases"].size(), 10u); }

TEST_F(LlamaCppGoldenTest, PromptTokenizationMatches) {
  for (const auto& c : (*golden_)["cases"]) {
    const auto want = c["prompt_tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(model_->tokenizer().Encode(c["text"].get<std::string>(), true), want)
        << "case " << c["name"];
  }
}

TEST_F(LlamaCppGoldenTest, GreedyTokensMatch) {
  int exact = 0;
  for (const auto& c : (*golden_)["cases"]) {
    const auto prompt = c["prompt_tokens"].get<std::vector<int32_t>>();
    const auto want = c["output_tokens"].get<std::vector<int32_t>>();
    const auto gaps = c["gap"].get<std::vector<double>>();
    const std::vector<int32_t> got = Generate(prompt, static_cast<int>(want.size()));
    ASSERT_EQ(got.size(), want.size());
    size_t i = 0;
    while (i < want.size() && got[i] == want[i]) ++i;
    if (i == want.size()) {
      ++exact;
      continue;
    }
    EXPECT_LT(gaps[i], kNearTie) << "case " << c["name"] << " diverges at step " << i
                                 << ": llama.cpp " << want[i] << ", pdserve " << got[i]
                                 << "; llama.cpp top-2 gap " << gaps[i]
                                 << "\nours: " << absl::StrJoin(got, " ");
    std::cout << "case " << c["name"] << " parts from llama.cpp at step " << i
              << " on a near tie (gap " << gaps[i] << ")\n";
  }
  std::cout << exact << " of " << (*golden_)["cases"].size() << " cases match all 64 tokens\n";
}

// How far our first-step logits may be from llama.cpp's: none at all where
// llama_numerics.h reproduces its AVX512 arithmetic (the golden data comes
// from an AVX512 build), else the rounding-order noise of other SIMD paths.
double FirstStepTolerance() { return LlamaExactNumericsActive() ? 0.0 : 0.5; }

// The first step's logits themselves, not only their argmax. The whole
// prompt goes in as one chunk: our batched prefill computes every position
// exactly as llama.cpp's token-by-token evaluation does.
TEST_F(LlamaCppGoldenTest, FirstStepLogitsClose) {
  for (const auto& c : (*golden_)["cases"]) {
    const auto prompt = c["prompt_tokens"].get<std::vector<int32_t>>();
    CpuModelRunner runner(model_->config(), &model_->weights(), 2);
    auto cache = KvCache::Create(KvLayout::ForModel(model_->config(), 16), 128);
    ASSERT_TRUE(cache.ok());
    auto blocks = (*cache)->allocator().Allocate(BlocksForTokens(prompt.size(), 16));
    ASSERT_TRUE(blocks.ok());
    ForwardBatch batch;
    batch.chunks.push_back({prompt, 0, *blocks, true});
    std::vector<float> logits;
    ASSERT_TRUE(runner.Forward(batch, **cache, &logits).ok());
    double max_err = 0;
    for (const auto& e : c["first_step_top20"]) {
      max_err = std::max(max_err, std::abs(logits[e["id"].get<int>()] - e["logit"].get<double>()));
    }
    std::cout << "case " << c["name"] << ": max |logit - llama.cpp| over its top 20 = " << max_err
              << "\n";
    EXPECT_LE(max_err, FirstStepTolerance()) << "case " << c["name"];
  }
}

// Our logits after every prompt prefix against llama.cpp's, bit for bit.
// The dump is too big for the tree; make it with
//   python3 tests/data/dump_llama_logits.py long_en_passage 64 /tmp/long64.f32
// and run with PDSERVE_LLAMA_PREFIX_LOGITS=/tmp/long64.f32.
TEST_F(LlamaCppGoldenTest, PrefixLogitsEqualLlamaCppDump) {
  const char* path = std::getenv("PDSERVE_LLAMA_PREFIX_LOGITS");
  if (path == nullptr) GTEST_SKIP() << "PDSERVE_LLAMA_PREFIX_LOGITS not set";
  if (!LlamaExactNumericsActive()) GTEST_SKIP() << "bit-exact only with AVX512F+DQ";
  std::ifstream meta(std::string(path) + ".json");
  ASSERT_TRUE(meta.good()) << path << ".json";
  const auto tokens = nlohmann::json::parse(meta)["tokens"].get<std::vector<int32_t>>();
  const int vocab = model_->config().n_vocab;
  std::ifstream f(path, std::ios::binary);
  std::vector<float> want(tokens.size() * vocab);
  f.read(reinterpret_cast<char*>(want.data()), static_cast<std::streamsize>(want.size() * 4));
  ASSERT_TRUE(f.good()) << path;

  CpuModelRunner runner(model_->config(), &model_->weights(), 2);
  auto cache = KvCache::Create(KvLayout::ForModel(model_->config(), 16), 128);
  ASSERT_TRUE(cache.ok());
  auto blocks = (*cache)->allocator().Allocate(BlocksForTokens(tokens.size(), 16));
  ASSERT_TRUE(blocks.ok());
  int exact = 0;
  for (size_t n = 0; n < tokens.size(); ++n) {
    ForwardBatch batch;
    batch.chunks.push_back(
        {absl::MakeConstSpan(&tokens[n], 1), static_cast<int32_t>(n), *blocks, true});
    std::vector<float> logits;
    ASSERT_TRUE(runner.Forward(batch, **cache, &logits).ok());
    double max_err = 0;
    for (int i = 0; i < vocab; ++i) {
      max_err = std::max(max_err, std::abs(double{logits[i]} - want[n * vocab + i]));
    }
    if (max_err == 0) ++exact;
    EXPECT_EQ(max_err, 0) << "prefix of " << n + 1 << " tokens";
  }
  std::cout << exact << " of " << tokens.size() << " prefixes bit-identical\n";
}

}  // namespace
}  // namespace pdserve
