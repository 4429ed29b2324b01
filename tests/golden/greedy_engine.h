// Greedy tokens for a prompt through the serving engine on the CPU runner,
// for the tests that compare against llama.cpp's recorded greedy tokens
// (and, with RunGreedy, logits).
#ifndef PDSERVE_TESTS_GOLDEN_GREEDY_ENGINE_H_
#define PDSERVE_TESTS_GOLDEN_GREEDY_ENGINE_H_

#include <cstdint>
#include <vector>

#include "common/cpu/cpu_model_runner.h"
#include "common/engine/engine.h"
#include "common/model/model.h"
#include "gtest/gtest.h"
#include "tests/testing/recording_runner.h"

namespace pdserve::testing {

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
  test::RecordingRunner runner(&cpu, test::RecordingRunner::Keep::kFirstRow);
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
  if (!runner.rows().empty()) run.first_logits = runner.rows().front();
  return run;
}

inline std::vector<int32_t> GreedyTokens(const Model& model, const std::vector<int32_t>& prompt,
                                         int n, int kv_blocks = 256) {
  return RunGreedy(model, prompt, n, kv_blocks).tokens;
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_GOLDEN_GREEDY_ENGINE_H_
