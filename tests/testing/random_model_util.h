// Test helper: a random llama model (common/model/random_model.h) parsed and bound
// the way a worker loads a real one.
#ifndef PDSERVE_TESTS_TESTING_RANDOM_MODEL_UTIL_H_
#define PDSERVE_TESTS_TESTING_RANDOM_MODEL_UTIL_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/engine/kv_cache.h"
#include "common/gguf/gguf_file.h"
#include "common/model/model_config.h"
#include "common/model/model_weights.h"
#include "common/model/random_model.h"
#include "common/text/tokenizer.h"
#include "gtest/gtest.h"

namespace pdserve::test {

struct TestModel {
  std::unique_ptr<GgufFile> gguf;  // the weights point into it
  ModelConfig config;
  ModelWeights weights;
};

// The small model the engine tests run: 2 layers, 64 wide, 4 query heads
// over 2 KV heads, a 300-token vocabulary.
inline RandomModelSpec SmallEngineSpec(uint64_t seed, int context_length = 128) {
  RandomModelSpec spec;
  spec.n_layers = 2;
  spec.n_embd = 64;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.n_vocab = 300;
  spec.context_length = context_length;
  spec.seed = seed;
  return spec;
}

// nullptr (with a test failure recorded) if any stage fails.
inline std::unique_ptr<TestModel> LoadTestModel(const RandomModelSpec& spec) {
  auto bytes = MakeRandomModelGguf(spec);
  if (!bytes.ok()) {
    ADD_FAILURE() << bytes.status();
    return nullptr;
  }
  auto m = std::make_unique<TestModel>();
  auto gguf = GgufFile::FromBuffer(std::move(*bytes));
  if (!gguf.ok()) {
    ADD_FAILURE() << gguf.status();
    return nullptr;
  }
  m->gguf = std::move(*gguf);
  auto config = ModelConfig::FromGguf(*m->gguf);
  if (!config.ok()) {
    ADD_FAILURE() << config.status();
    return nullptr;
  }
  m->config = *config;
  auto weights = ModelWeights::Load(*m->gguf, m->config);
  if (!weights.ok()) {
    ADD_FAILURE() << weights.status();
    return nullptr;
  }
  m->weights = std::move(*weights);
  return m;
}

inline std::vector<int32_t> RandomTokens(int n, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = dist(rng);
  return t;
}

// A test model with its tokenizer and a KV cache of `blocks` blocks of 16
// tokens: what an Engine over it needs. `model` is null on failure (with a
// test failure recorded).
struct EngineParts {
  std::unique_ptr<TestModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<KvCache> cache;
};

inline EngineParts LoadEngineParts(const RandomModelSpec& spec, int32_t blocks) {
  EngineParts p;
  std::unique_ptr<TestModel> model = LoadTestModel(spec);
  if (model == nullptr) return p;
  auto tokenizer = Tokenizer::FromGguf(*model->gguf);
  auto cache = KvCache::Create(KvLayout::ForModel(model->config, 16), blocks);
  if (!tokenizer.ok() || !cache.ok()) {
    ADD_FAILURE() << tokenizer.status() << " " << cache.status();
    return p;
  }
  p.tokenizer = std::move(*tokenizer);
  p.cache = std::move(*cache);
  p.model = std::move(model);
  return p;
}

}  // namespace pdserve::test

#endif  // PDSERVE_TESTS_TESTING_RANDOM_MODEL_UTIL_H_
