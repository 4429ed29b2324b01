// Greedy tokens for a prompt through the serving engine on the CPU runner,
// for the tests that compare against llama.cpp's recorded greedy tokens
// (and, with RunGreedy, logits).
#ifndef PDSERVE_TESTS_GOLDEN_GREEDY_ENGINE_H_
#define PDSERVE_TESTS_GOLDEN_GREEDY_ENGINE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/cpu/cpu_model_runner.h"
#include "common/engine/engine.h"
#include "common/engine/model_runner.h"
#include "common/model/model.h"
#include "gtest/gtest.h"

namespace pdserve::testing {

// Hands each forward pass to `inner` and keeps, of every logits row it
// returns, the largest logit (the greedy token's), and the first row whole.
class MaxLogitRecorder : public ModelRunner {
 public:
  explicit MaxLogitRecorder(ModelRunner* inner) : inner_(inner) {}
  const ModelConfig& config() const override { return inner_->config(); }
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache,
                       std::vector<float>* logits) override {
    absl::Status status = inner_->Forward(batch, cache, logits);
    const auto vocab = static_cast<size_t>(config().n_vocab);
    for (size_t r = 0; status.ok() && r + vocab <= logits->size(); r += vocab) {
      const auto row = logits->begin() + static_cast<std::ptrdiff_t>(r);
      if (first_.empty()) first_.assign(row, row + static_cast<std::ptrdiff_t>(vocab));
      max_.push_back(*std::max_element(row, row + static_cast<std::ptrdiff_t>(vocab)));
    }
    return status;
  }
  const std::vector<float>& max_logits() const { return max_; }
  const std::vector<float>& first_row() const { return first_; }

 private:
  ModelRunner* inner_;
  std::vector<float> max_;
  std::vector<float> first_;
};

// A greedy run: its tokens, each step's largest logit (that of the token
// it chose) and the first step's logits.
struct GreedyRun {
  std::vector<int32_t> tokens;
  std::vector<float> max_logits;
  std::vector<float> first_logits;
};

// `n` tokens after `prompt`, EOS not stopping them.
inline GreedyRun RunGreedy(const Model& model, const std::vector<int32_t>& prompt, int n,
                           int kv_blocks = 256) {
  CpuModelRunner cpu(model.config(), &model.weights(), 2);
  MaxLogitRecorder runner(&cpu);
  auto cache = KvCache::Create(KvLayout::ForModel(model.config(), 16), kv_blocks);
  EXPECT_TRUE(cache.ok());
  if (!cache.ok()) return {};
  Engine engine(&model.tokenizer(), &runner, cache->get(), {});
  GreedyRun run;
  SequenceOptions o;
  o.prompt = prompt;
  o.max_tokens = n;
  o.ignore_eos = true;
  auto id = engine.Add(o, [&](const TokenEvent& e) {
    if (e.token >= 0) run.tokens.push_back(e.token);
  });
  EXPECT_TRUE(id.ok()) << id.status();
  while (engine.HasWork()) EXPECT_TRUE(engine.Step().ok());
  run.max_logits = runner.max_logits();
  run.first_logits = runner.first_row();
  return run;
}

inline std::vector<int32_t> GreedyTokens(const Model& model, const std::vector<int32_t>& prompt,
                                         int n, int kv_blocks = 256) {
  return RunGreedy(model, prompt, n, kv_blocks).tokens;
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_GOLDEN_GREEDY_ENGINE_H_
