// Greedy tokens for a prompt through the serving engine on the CPU runner,
// for the tests that compare against llama.cpp's recorded greedy tokens.
#ifndef PDSERVE_TESTS_GOLDEN_GREEDY_ENGINE_H_
#define PDSERVE_TESTS_GOLDEN_GREEDY_ENGINE_H_

#include <cstdint>
#include <vector>

#include "common/cpu/cpu_model_runner.h"
#include "common/engine/engine.h"
#include "common/model/model.h"
#include "gtest/gtest.h"

namespace pdserve::testing {

// `n` tokens after `prompt`, EOS not stopping them.
inline std::vector<int32_t> GreedyTokens(const Model& model, const std::vector<int32_t>& prompt,
                                         int n, int kv_blocks = 256) {
  CpuModelRunner runner(model.config(), &model.weights(), 2);
  auto cache = KvCache::Create(KvLayout::ForModel(model.config(), 16), kv_blocks);
  EXPECT_TRUE(cache.ok());
  if (!cache.ok()) return {};
  Engine engine(&model.tokenizer(), &runner, cache->get(), {});
  std::vector<int32_t> out;
  SequenceOptions o;
  o.prompt = prompt;
  o.max_tokens = n;
  o.ignore_eos = true;
  auto id = engine.Add(o, [&](const TokenEvent& e) {
    if (e.token >= 0) out.push_back(e.token);
  });
  EXPECT_TRUE(id.ok()) << id.status();
  while (engine.HasWork()) EXPECT_TRUE(engine.Step().ok());
  return out;
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_GOLDEN_GREEDY_ENGINE_H_
