// The engine's prefix cache: shared prompt prefixes are reused block by
// block, outputs are identical with and without the cache (greedy and
// seeded sampling), shared blocks are refcounted, every path that ends a
// sequence returns the pool to fully free, eviction is LRU under pressure,
// and a decode-side reservation needs only the blocks it does not hold.
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "common/cpu/cpu_model_runner.h"
#include "common/engine/engine.h"
#include "common/engine/kv_cache.h"
#include "common/text/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/flattened_runner.h"
#include "tests/testing/random_model_util.h"

namespace pdserve {
namespace {

using test::FlattenedRunner;
using test::RandomTokens;

constexpr int32_t kBlockSize = 16;

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class EnginePrefixCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::LoadTestModel(test::SmallEngineSpec(5));
    ASSERT_NE(model_, nullptr);
    auto tok = Tokenizer::FromGguf(*model_->gguf);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok);
    runner_ = std::make_unique<CpuModelRunner>(model_->config, &model_->weights, 2);
    flat_ = std::make_unique<FlattenedRunner>(runner_.get());
    system_ = RandomTokens(40, model_->config.n_vocab, 1);
  }

  std::unique_ptr<KvCache> NewCache(int32_t blocks = 64) {
    auto c = KvCache::Create(KvLayout::ForModel(model_->config, kBlockSize), blocks);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }

  std::unique_ptr<Engine> NewEngine(KvCache* cache, bool prefix_cache, bool sampled,
                                    int32_t max_batch_tokens = 512) {
    Engine::Options o;
    o.prefix_cache = prefix_cache;
    o.max_batch_tokens = max_batch_tokens;
    ModelRunner* runner = sampled ? static_cast<ModelRunner*>(flat_.get()) : runner_.get();
    return std::make_unique<Engine>(tokenizer_.get(), runner, cache, o);
  }

  SequenceOptions Seq(std::vector<int32_t> prompt, bool sampled, int max_tokens = 12) {
    SequenceOptions o;
    o.prompt = std::move(prompt);
    o.max_tokens = max_tokens;
    o.ignore_eos = true;
    if (sampled) {
      o.sampling.temperature = 0.8f;
      o.sampling.top_k = 20;
      o.sampling.seed = 7;
    }
    return o;
  }

  struct Run {
    std::vector<int32_t> tokens;
    int32_t cached = 0;
  };
  // Adds one sequence and steps the engine until it is done.
  Run RunOne(Engine& engine, const SequenceOptions& o) {
    Run r;
    auto id = engine.Add(o, [&](const TokenEvent& e) {
      if (e.token >= 0) r.tokens.push_back(e.token);
    });
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return r;
    r.cached = engine.CachedTokensOf(*id);
    while (engine.HasWork()) EXPECT_TRUE(engine.Step().ok());
    return r;
  }

  std::vector<int32_t> Suffix(int n, uint64_t seed) {
    return RandomTokens(n, model_->config.n_vocab, seed);
  }

  std::unique_ptr<test::TestModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<CpuModelRunner> runner_;
  std::unique_ptr<FlattenedRunner> flat_;
  std::vector<int32_t> system_;  // a shared 40-token prefix
};

// A conversation-like series: each prompt shares a prefix with earlier
// ones; the cached run must produce exactly the uncached run's tokens.
TEST_F(EnginePrefixCacheTest, CachedOutputsEqualUncached) {
  for (bool sampled : {false, true}) {
    auto cached_cache = NewCache();
    auto plain_cache = NewCache();
    auto cached = NewEngine(cached_cache.get(), true, sampled);
    auto plain = NewEngine(plain_cache.get(), false, sampled);
    const std::vector<int32_t> p0 = Concat(system_, Suffix(5, 2));
    std::vector<std::vector<int32_t>> prompts = {
        p0, Concat(system_, Suffix(9, 3)),  // shares blocks 0-1 with p0
        p0,                                 // identical: the last token is recomputed
        std::vector<int32_t>(system_.begin(), system_.begin() + 32),  // 2 whole blocks
    };
    const std::vector<int32_t> expected_hits = {0, 32, 32, 16, 48};
    std::vector<std::vector<int32_t>> outputs;
    for (size_t i = 0; i <= prompts.size(); ++i) {
      // The last turn continues p0 with its own output, like chat history:
      // its third block holds generated tokens, cached during decode.
      const std::vector<int32_t> prompt = i < prompts.size() ? prompts[i] : Concat(p0, outputs[0]);
      const Run c = RunOne(*cached, Seq(prompt, sampled));
      const Run p = RunOne(*plain, Seq(prompt, sampled));
      EXPECT_EQ(c.tokens, p.tokens) << "prompt " << i << " sampled " << sampled;
      EXPECT_EQ(c.cached, expected_hits[i]) << "prompt " << i;
      EXPECT_EQ(p.cached, 0);
      outputs.push_back(c.tokens);
    }
    EXPECT_EQ(cached->prefix_stats().hit_tokens, 128);
    EXPECT_EQ(plain->prefix_stats().hit_tokens, 0);
    EXPECT_EQ(cached->prefix_stats().lookup_tokens, plain->prefix_stats().lookup_tokens);
    EXPECT_EQ(cached_cache->allocator().num_free(), 64);
    EXPECT_GT(cached_cache->allocator().num_cached_free(), 0);
    EXPECT_EQ(plain_cache->allocator().num_cached_free(), 0);
    // The comparison is sensitive: another first token changes the output.
    std::vector<int32_t> other = p0;
    other[0] = (other[0] + 1) % model_->config.n_vocab;
    if (sampled) EXPECT_NE(RunOne(*plain, Seq(other, true)).tokens, outputs[0]);
  }
}

TEST_F(EnginePrefixCacheTest, ConcurrentSequencesShareRefcountedBlocks) {
  auto cache = NewCache();
  auto engine = NewEngine(cache.get(), true, true);
  RunOne(*engine, Seq(Concat(system_, Suffix(5, 2)), true));
  std::vector<std::vector<int32_t>> out(2);
  std::vector<int64_t> ids;
  for (int i = 0; i < 2; ++i) {
    auto id =
        engine->Add(Seq(Concat(system_, Suffix(7, 10 + i)), true), [&out, i](const TokenEvent& e) {
          if (e.token >= 0) out[i].push_back(e.token);
        });
    ASSERT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
  }
  const std::vector<int32_t> a = engine->BlocksOf(ids[0]), b = engine->BlocksOf(ids[1]);
  ASSERT_GE(a.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(a[i], b[i]);
    EXPECT_EQ(cache->allocator().refcount(a[i]), 2);
  }
  EXPECT_NE(a[2], b[2]);  // the diverging block is private
  while (engine->HasWork()) ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(cache->allocator().num_free(), 64);
  auto plain_cache = NewCache();
  auto plain = NewEngine(plain_cache.get(), false, true);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(out[i], RunOne(*plain, Seq(Concat(system_, Suffix(7, 10 + i)), true)).tokens) << i;
  }
}

// Cancel mid-prefill, cancel a decode-side reservation (its KV transfer
// aborted), hand over and free a prefill worker's held blocks, destroy the
// engine with live sequences: each time the pool is fully free again and
// the cached prefix survives.
TEST_F(EnginePrefixCacheTest, EveryEndReleasesSharedBlocksExactlyOnce) {
  auto cache = NewCache();
  const std::vector<int32_t> p1 = Concat(system_, Suffix(30, 3));
  {
    auto engine = NewEngine(cache.get(), true, false, /*max_batch_tokens=*/8);
    RunOne(*engine, Seq(Concat(system_, Suffix(5, 2)), false));
    const int32_t cached_free = cache->allocator().num_cached_free();
    ASSERT_EQ(cached_free, 3);

    auto id = engine->Add(Seq(p1, false), [](const TokenEvent&) {});
    ASSERT_TRUE(id.ok());
    EXPECT_EQ(engine->CachedTokensOf(*id), 32);
    ASSERT_TRUE(engine->Step().ok());  // 8 of the 38 uncached prompt tokens
    engine->Cancel(*id);
    EXPECT_EQ(cache->allocator().num_free(), 64);

    auto reserved = engine->Reserve(Seq(p1, false), [](const TokenEvent&) {});
    ASSERT_TRUE(reserved.ok());
    EXPECT_EQ(engine->CachedTokensOf(*reserved), 32);
    EXPECT_FALSE(engine->HasWork());  // waits for the rest of its KV
    engine->Cancel(*reserved);        // e.g. the transfer was aborted
    EXPECT_EQ(cache->allocator().num_free(), 64);

    SequenceOptions held = Seq(p1, false, 1);
    held.hold_kv_on_finish = true;
    auto h = engine->Add(held, [](const TokenEvent&) {});
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(engine->CachedTokensOf(*h), 32);
    while (engine->HasWork()) ASSERT_TRUE(engine->Step().ok());
    const std::vector<int32_t> blocks = engine->TakeHeldBlocks(*h);
    ASSERT_EQ(blocks.size(), 5u);  // 70 prompt tokens
    EXPECT_LT(cache->allocator().num_free(), 64);
    engine->FreeBlocks(blocks);
    EXPECT_EQ(cache->allocator().num_free(), 64);
    EXPECT_EQ(cache->allocator().num_cached_free(), cached_free + 2);  // p1's blocks 2 and 3

    ASSERT_TRUE(engine->Add(Seq(p1, false), [](const TokenEvent&) {}).ok());
    ASSERT_TRUE(engine->Add(Seq(p1, false), [](const TokenEvent&) {}).ok());
    ASSERT_TRUE(engine->Step().ok());
  }  // destroyed with both still running
  EXPECT_EQ(cache->allocator().num_free(), 64);
  for (int32_t b = 0; b < 64; ++b) EXPECT_EQ(cache->allocator().refcount(b), 0) << b;
}

TEST_F(EnginePrefixCacheTest, EvictionIsLruAndOnlyWhenBlocksAreNeeded) {
  auto cache = NewCache(8);  // 128 token slots
  auto engine = NewEngine(cache.get(), true, false);
  const std::vector<int32_t> p0 = Concat(system_, Suffix(5, 2));
  const Run first = RunOne(*engine, Seq(p0, false));  // publishes 3 blocks
  EXPECT_EQ(cache->allocator().num_cached_free(), 3);
  const std::vector<int32_t> turn2 = Concat(p0, first.tokens);  // 57 tokens: 3 blocks cached
  // Needs 6 blocks: the 5 empty ones and the least recently parked cached
  // one, p0's deepest block.
  RunOne(*engine, Seq(Suffix(60, 9), false, 37));
  EXPECT_EQ(cache->allocator().num_free(), 8);
  EXPECT_EQ(RunOne(*engine, Seq(turn2, false)).cached, 32);
  // A sequence needing the whole pool evicts everything cached.
  RunOne(*engine, Seq(Suffix(100, 11), false, 20));
  EXPECT_EQ(RunOne(*engine, Seq(turn2, false)).cached, 0);
  EXPECT_EQ(cache->allocator().num_free(), 8);
}

// Disaggregation at engine level: a prefill engine computes a prompt, the
// decode engine holds the shared prefix already and receives only the
// other blocks (what KvExporter/the receiver do over TCP); its output equals
// a plain local run.
TEST_F(EnginePrefixCacheTest, DecodeReservationNeedsOnlyTheUncachedBlocks) {
  for (bool sampled : {false, true}) {
    auto p_cache = NewCache();
    auto d_cache = NewCache();
    auto prefill = NewEngine(p_cache.get(), true, sampled);
    auto decode = NewEngine(d_cache.get(), true, sampled);
    RunOne(*decode, Seq(Concat(system_, Suffix(5, 2)), sampled));        // warms D's cache
    const std::vector<int32_t> prompt = Concat(system_, Suffix(20, 4));  // 60 tokens, 4 blocks

    SequenceOptions p_opts = Seq(prompt, sampled, 1);
    p_opts.hold_kv_on_finish = true;
    int32_t first = -1;
    auto pid = prefill->Add(p_opts, [&](const TokenEvent& e) {
      if (e.token >= 0) first = e.token;
    });
    ASSERT_TRUE(pid.ok());
    while (prefill->HasWork()) ASSERT_TRUE(prefill->Step().ok());
    const std::vector<int32_t> src = prefill->TakeHeldBlocks(*pid);

    std::vector<int32_t> out;
    auto did = decode->Reserve(Seq(prompt, sampled), [&](const TokenEvent& e) {
      if (e.token >= 0) out.push_back(e.token);
    });
    ASSERT_TRUE(did.ok());
    const int32_t skip = decode->CachedTokensOf(*did) / kBlockSize;
    EXPECT_EQ(skip, 2);
    const std::vector<int32_t> dst = decode->BlocksOf(*did);
    const KvLayout& layout = d_cache->layout();
    for (int layer = 0; layer < layout.n_layers; ++layer) {
      for (int32_t b = skip; b < BlocksForTokens(prompt.size(), kBlockSize); ++b) {
        std::memcpy(d_cache->LayerBlock(layer, dst[b]), p_cache->LayerBlock(layer, src[b]),
                    layout.bytes_per_layer_block());
      }
    }
    prefill->FreeBlocks(src);
    ASSERT_TRUE(decode->CommitPrefilled(*did, first, std::nullopt).ok());
    while (decode->HasWork()) ASSERT_TRUE(decode->Step().ok());

    auto plain_cache = NewCache();
    auto plain = NewEngine(plain_cache.get(), false, sampled);
    EXPECT_EQ(out, RunOne(*plain, Seq(prompt, sampled)).tokens) << "sampled " << sampled;
    EXPECT_EQ(d_cache->allocator().num_free(), 64);
    EXPECT_EQ(p_cache->allocator().num_free(), 64);
    // The committed prompt's blocks are cached on D for the next turn.
    const Run again = RunOne(*decode, Seq(Concat(prompt, Suffix(3, 5)), sampled));
    EXPECT_EQ(again.cached, 48);
  }
}

}  // namespace
}  // namespace pdserve
