// Sliding-window layers in the engine: a long decode gives each window
// layer's out-of-window blocks back, so the pool's resident memory holds
// about a window per such layer whatever the context, while global layers
// keep every position; and a cached prefix is reused only where the blocks
// its first token's window reads were kept. Residency is what the kernel
// reports (mincore), not our own bookkeeping.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <memory>
#include <vector>

#include "common/engine/engine.h"
#include "common/engine/kv_cache.h"
#include "common/text/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/fixed_token_runner.h"
#include "tests/testing/random_model_util.h"

namespace pdserve {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kWindow = 512;
constexpr int32_t kDecodeTokens = 8192;

bool Resident(const uint8_t* p, int64_t bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p) / page * page;
  std::vector<unsigned char> in((reinterpret_cast<uintptr_t>(p) + bytes - begin + page - 1) / page);
  EXPECT_EQ(mincore(reinterpret_cast<void*>(begin), in.size() * page, in.data()), 0);
  return std::any_of(in.begin(), in.end(), [](unsigned char c) { return c & 1; });
}

class EngineWindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::LoadTestModel(test::SmallEngineSpec(5));
    ASSERT_NE(model_, nullptr);
    auto tok = Tokenizer::FromGguf(*model_->gguf);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok);
    // Gemma 3's KV shape (one head of 256: a layer block is 4 pages) and
    // pattern (every third layer global here), long enough for 8k tokens.
    config_ = model_->config;
    config_.n_layers = 6;
    config_.n_heads = 4;
    config_.n_kv_heads = 1;
    config_.head_dim = 256;
    config_.context_length = 16384;
    config_.layer_window = {kWindow, kWindow, 0, kWindow, kWindow, 0};
    auto cache = KvCache::Create(KvLayout::ForModel(config_, kBlockSize), 1024);
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = std::move(*cache);
  }

  // Blocks of `blocks` whose layer-l span has resident pages.
  int ResidentBlocks(int layer, const std::vector<int32_t>& blocks) {
    int n = 0;
    for (int32_t b : blocks) {
      n += Resident(cache_->LayerBlock(layer, b), cache_->layout().bytes_per_layer_block());
    }
    return n;
  }

  std::unique_ptr<test::TestModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ModelConfig config_;
  std::unique_ptr<KvCache> cache_;
};

TEST_F(EngineWindowTest, ALongDecodeHoldsAWindowPerLocalLayer) {
  const int32_t token = 7;
  test::FixedTokenRunner runner(config_, token, /*write_kv=*/true);
  Engine::Options opts;
  opts.prefix_cache = true;
  Engine engine(tokenizer_.get(), &runner, cache_.get(), opts);
  SequenceOptions o;
  o.prompt = test::RandomTokens(40, config_.n_vocab, 3);
  o.max_tokens = kDecodeTokens;
  o.ignore_eos = true;
  std::vector<int32_t> generated;
  auto id = engine.Add(o, [&](const TokenEvent& e) {
    if (e.token >= 0) generated.push_back(e.token);
  });
  ASSERT_TRUE(id.ok()) << id.status();
  // A window rounded out to the kernels' 64-position alignment, plus the
  // blocks the boundaries cut.
  const int max_window_blocks = (kWindow + KvLayout::kWindowReadAlign) / kBlockSize + 2;
  int steps = 0;
  while (engine.HasWork()) {
    ASSERT_TRUE(engine.Step().ok());
    ++steps;
    // Every 2k tokens, and just before the last step ends the sequence.
    const bool check = steps == kDecodeTokens - 2 || (steps % 2048 == 0 && steps < kDecodeTokens);
    if (!check) continue;
    const std::vector<int32_t> blocks = engine.BlocksOf(*id);
    ASSERT_FALSE(blocks.empty()) << "after " << steps << " steps";
    const int used = (40 + steps) / kBlockSize;
    for (int l = 0; l < config_.n_layers; ++l) {
      const int resident = ResidentBlocks(l, blocks);
      if (steps == kDecodeTokens - 2) {
        std::cout << "layer " << l << ": " << resident << " of " << blocks.size()
                  << " blocks resident\n";
      }
      if (config_.layer_window[l] > 0) {
        EXPECT_LE(resident, max_window_blocks) << "layer " << l << " after " << steps << " steps";
      } else {
        EXPECT_GE(resident, used) << "layer " << l << " after " << steps << " steps";
      }
    }
  }
  ASSERT_EQ(generated.size(), static_cast<size_t>(kDecodeTokens));

  // The finished sequence's blocks stay cached. A prompt sharing a prefix
  // whose window blocks were given back reuses nothing; one sharing all but
  // its last block, whose window (the last ~W + 64 positions) is intact,
  // reuses it.
  std::vector<int32_t> all = o.prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  SequenceOptions early;
  early.prompt.assign(all.begin(), all.begin() + 1000);
  early.max_tokens = 1;
  auto early_id = engine.Add(early, [](const TokenEvent&) {});
  ASSERT_TRUE(early_id.ok());
  EXPECT_EQ(engine.CachedTokensOf(*early_id), 0);
  SequenceOptions late;
  late.prompt.assign(all.begin(), all.end() - kBlockSize);
  late.max_tokens = 1;
  auto late_id = engine.Add(late, [](const TokenEvent&) {});
  ASSERT_TRUE(late_id.ok());
  EXPECT_GE(engine.CachedTokensOf(*late_id), static_cast<int32_t>(late.prompt.size()) - 2 * kBlockSize);
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
}

// Pages of the whole pool that are resident.
int64_t ResidentBytes(KvCache& cache) {
  const auto page = static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  const auto bytes = static_cast<int64_t>(KvCache::PoolBytes(cache.layout(), cache.num_ids()));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  EXPECT_EQ(mincore(cache.pool(), static_cast<size_t>(bytes), in.data()), 0);
  return page * std::count_if(in.begin(), in.end(), [](unsigned char c) { return c & 1; });
}

// What the window gives back serves more sequences: a pool that fits two
// long decodes by block count admits a third once their windows slide,
// while the memory in use (resident pages, as the kernel counts them) never
// exceeds the budget, every sequence still decodes to its end, and pool
// after pool of new work on the ids the long decodes left behind stays
// within it too (the ids beyond the budget give their pages back).
TEST_F(EngineWindowTest, SlidingWindowsMakeRoomForMoreSequences) {
  constexpr int32_t kMaxTokens = 4000;
  constexpr int32_t kSequenceBlocks = 253;  // 40 + 4,000 - 1 positions
  constexpr int32_t kBudget = 2 * kSequenceBlocks;
  auto pool = KvCache::Create(KvLayout::ForModel(config_, kBlockSize), kBudget);
  ASSERT_TRUE(pool.ok());
  KvCache& cache = **pool;
  EXPECT_GT(cache.num_ids(), kBudget) << "window layers can give memory back";
  const int64_t budget_bytes = int64_t{kBudget} * cache.layout().bytes_per_layer_block() *
                               cache.layout().n_layers;
  test::FixedTokenRunner runner(config_, 7, /*write_kv=*/true);
  Engine engine(tokenizer_.get(), &runner, &cache, Engine::Options{});
  // Each sequence reserves prompt + max_tokens up front, so two fill the
  // budget by block count.
  SequenceOptions o;
  o.prompt = test::RandomTokens(40, config_.n_vocab, 5);
  o.max_tokens = kMaxTokens;
  o.ignore_eos = true;
  std::vector<int> produced(64, 0);
  auto add = [&](int i) {
    return engine.Add(o, [&produced, i](const TokenEvent& e) { produced[i] += e.token >= 0; });
  };
  ASSERT_TRUE(add(0).ok());
  ASSERT_TRUE(add(1).ok());
  EXPECT_EQ(cache.allocator().num_free(), 0);
  EXPECT_EQ(add(2).status().code(), absl::StatusCode::kResourceExhausted);
  // 3,800 tokens in, every block before the window (208 of them) has given
  // back its 4 window layers of 6: room for one more sequence.
  int admitted = 2;
  for (int step = 0; engine.HasWork(); ++step) {
    ASSERT_TRUE(engine.Step().ok());
    ASSERT_LE(cache.allocator().charged_bytes(), budget_bytes);
    if (step % 256 == 0) ASSERT_LE(ResidentBytes(cache), budget_bytes) << "step " << step;
    if (step == 3800) {
      EXPECT_GE(cache.allocator().num_free(), kSequenceBlocks);
      ASSERT_TRUE(add(admitted).ok()) << "a third sequence fits in the freed memory";
      ++admitted;
    }
  }
  EXPECT_EQ(admitted, 3);
  for (int i = 0; i < admitted; ++i) EXPECT_EQ(produced[i], kMaxTokens) << "sequence " << i;
  EXPECT_EQ(cache.allocator().num_free(), kBudget) << "every byte comes back";
  // The finished sequences' blocks stay cached (parked, still charged, free).
  EXPECT_GT(cache.allocator().num_cached_free(), 0);

  // Then as many short sequences (inside the window: every layer stays
  // resident) as the budget takes, on a pool whose ids the long decodes
  // touched: the cached blocks are evicted for room, and the ids evicted
  // but not reused give their pages back.
  o.prompt = test::RandomTokens(40, config_.n_vocab, 6);
  o.max_tokens = 400;
  int shorts = 0;
  while (add(admitted + shorts).ok()) ++shorts;
  EXPECT_EQ(shorts, kBudget / 28) << "28 blocks each";
  for (int step = 0; engine.HasWork(); ++step) {
    ASSERT_TRUE(engine.Step().ok());
    if (step % 25 == 0) ASSERT_LE(ResidentBytes(cache), budget_bytes) << "step " << step;
  }
  for (int i = admitted; i < admitted + shorts; ++i) EXPECT_EQ(produced[i], 400) << "short " << i;
}

}  // namespace
}  // namespace pdserve
