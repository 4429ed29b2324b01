// AttendTile against AttendHead, bit for bit: tiles only reorder the loops,
// so every row must come out exactly as the per-(token, head) kernel
// computes it, for every tile shape, cache dtype and kernel ISA. And the
// planner covers each (token, head) of a step exactly once.
#include "common/cpu/attention_tile.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "common/cpu/kv_int8.h"
#include "common/quant/half.h"
#include "common/quant/kernels.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

constexpr AttentionShape kShape{.n_heads = 6, .n_kv_heads = 2, .head_dim = 32};
// The SIMD kernels work in 64- and 8-float chunks: 72 and 76 take the
// 64-float register path (as SmolLM2's 64 does) plus an 8-float chunk, 76 and
// 36 a scalar tail too. None is a multiple of 16, so with an f16 cache they
// stay on the portable tiled path on every CPU; 32 and 64 (SmolLM2's, which
// the bit-exact kernels compile with fixed loops) take the llama_numerics.h
// kernels wherever the ISA is AVX2 or AVX512.
constexpr AttentionShape kOddShape{.n_heads = 6, .n_kv_heads = 2, .head_dim = 36};
constexpr AttentionShape kWideShape{.n_heads = 6, .n_kv_heads = 2, .head_dim = 72};
constexpr AttentionShape kWideOddShape{.n_heads = 6, .n_kv_heads = 2, .head_dim = 76};
constexpr AttentionShape kSmolShape{.n_heads = 9, .n_kv_heads = 3, .head_dim = 64};
constexpr int kBlockSize = 8;
constexpr int kContext = 45;  // five full blocks and a partial one

// A one-layer cache of kContext random positions in shuffled blocks. Some
// K rows are scaled up so that softmax probabilities underflow f16 and the
// kernels' p == 0 skips are exercised too.
class AttentionTileTest
    : public ::testing::TestWithParam<std::tuple<std::string, KernelIsa, AttentionShape>> {
 protected:
  void SetUp() override {
    ForceKernelIsaForTesting(std::get<1>(GetParam()));
    shape_ = std::get<2>(GetParam());
    KvLayout layout{.n_layers = 1,
                    .n_kv_heads = shape_.n_kv_heads,
                    .head_dim = shape_.head_dim,
                    .block_size = kBlockSize,
                    .dtype = std::get<0>(GetParam())};
    cache_ = KvCache::Create(layout, 16).value();
    const int n_blocks = (kContext + kBlockSize - 1) / kBlockSize;
    for (int b = 0; b < n_blocks; ++b) blocks_.push_back(15 - 2 * b);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int64_t kvd = layout.kv_dim();
    for (int j = 0; j < kContext; ++j) {
      const int32_t b = blocks_[j / kBlockSize];
      const int r = j % kBlockSize;
      std::vector<float> k(kvd), v(kvd);
      const float boost = j % 7 == 3 ? 12.0f : 1.0f;
      for (auto& x : k) x = normal(rng) * boost;
      for (auto& x : v) x = normal(rng);
      for (int h = 0; h < shape_.n_kv_heads; ++h) StoreRow(b, r, h, k, v);
    }
    q_.resize(static_cast<size_t>(kContext) * RowStride());
    for (auto& x : q_) x = normal(rng);
  }
  void TearDown() override { ForceKernelIsaForTesting(KernelIsa::kAvx512Vnni); }

  void StoreRow(int32_t b, int r, int h, const std::vector<float>& k, const std::vector<float>& v) {
    const int dh = shape_.head_dim;
    const int64_t kvd = cache_->layout().kv_dim();
    const int64_t at = r * kvd + h * dh;
    if (cache_->layout().is_int8()) {
      cache_->KScales(0, b)[r * shape_.n_kv_heads + h] =
          QuantizeKvInt8(&k[h * dh], dh, cache_->K8(0, b) + at);
      cache_->VScales(0, b)[r * shape_.n_kv_heads + h] =
          QuantizeKvInt8(&v[h * dh], dh, cache_->V8(0, b) + at);
      return;
    }
    for (int i = 0; i < dh; ++i) {
      cache_->K(0, b)[at + i] = F32ToF16(k[h * dh + i]);
      cache_->V(0, b)[at + i] = F32ToF16(v[h * dh + i]);
    }
  }

  int64_t RowStride() const { return static_cast<int64_t>(shape_.n_heads) * shape_.head_dim; }

  // out of query token i (position first_pos + i), head h, per AttendHead;
  // window > 0 attends the last `window` positions only.
  std::vector<float> Reference(int first_pos, int n_tokens, int window) {
    std::vector<float> out(static_cast<size_t>(n_tokens) * RowStride());
    std::vector<float> scratch;
    for (int i = 0; i < n_tokens; ++i) {
      for (int h = 0; h < shape_.n_heads; ++h) {
        const int64_t off = i * RowStride() + h * shape_.head_dim;
        const int n_ctx = first_pos + i + 1;
        AttendHead(shape_, h, &q_[(first_pos + i) * RowStride() + h * shape_.head_dim], n_ctx,
                   blocks_, *cache_, 0, &out[off], scratch,
                   window > 0 ? std::max(0, n_ctx - window) : 0);
      }
    }
    return out;
  }

  AttentionShape shape_;
  std::unique_ptr<KvCache> cache_;
  std::vector<int32_t> blocks_;
  std::vector<float> q_;  // [position][head][head_dim]
};

TEST_P(AttentionTileTest, EveryTileShapeMatchesThePerHeadKernelBitForBit) {
  AttentionScratch scratch;  // reused across tiles of different sizes, as in the runner
  for (int window : {0, 3, 16}) {
  for (int first_pos : {0, 1, 7, 8, 20, 44}) {
    for (int n_tokens : {1, 2, 5, 16, 25}) {
      if (first_pos + n_tokens > kContext) continue;
      const std::vector<float> want = Reference(first_pos, n_tokens, window);
      for (int heads_per_tile : {1, 3}) {
        std::vector<float> got(want.size(), -1.0f);
        for (int h = 0; h < shape_.n_heads; h += heads_per_tile) {
          const AttentionTile tile{.first_token = 0,
                                   .first_pos = first_pos,
                                   .n_tokens = n_tokens,
                                   .first_head = h,
                                   .n_heads = heads_per_tile};
          AttendTile(shape_, tile, window, &q_[first_pos * RowStride()], RowStride(), blocks_,
                     *cache_, 0, got.data(), scratch);
        }
        EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
            << "first_pos " << first_pos << ", " << n_tokens << " tokens, " << heads_per_tile
            << " heads per tile, window " << window;
      }
    }
  }
  }
}

INSTANTIATE_TEST_SUITE_P(DtypesAndIsas, AttentionTileTest,
                         ::testing::Combine(::testing::Values("f16", "int8"),
                                            ::testing::Values(KernelIsa::kScalar, KernelIsa::kAvx2,
                                                              KernelIsa::kAvx512Vnni),
                                            ::testing::Values(kShape, kOddShape, kWideShape,
                                                              kWideOddShape, kSmolShape)));

// Each (token, head) of the step in exactly one tile, within its chunk.
std::set<std::pair<int64_t, int>> Covered(const std::vector<AttentionTile>& tiles,
                                          const std::vector<ChunkSpan>& chunks) {
  std::set<std::pair<int64_t, int>> seen;
  for (const AttentionTile& t : tiles) {
    const ChunkSpan& c = chunks[t.chunk];
    EXPECT_GE(t.first_token, c.first_token);
    EXPECT_LE(t.first_token + t.n_tokens, c.first_token + c.n_tokens);
    EXPECT_EQ(t.first_pos - c.first_pos, t.first_token - c.first_token);
    // Heads of one KV head only.
    const int group = kShape.n_heads / kShape.n_kv_heads;
    EXPECT_EQ(t.first_head / group, (t.first_head + t.n_heads - 1) / group);
    for (int i = 0; i < t.n_tokens; ++i) {
      for (int h = t.first_head; h < t.first_head + t.n_heads; ++h) {
        EXPECT_TRUE(seen.insert({t.first_token + i, h}).second) << "twice: " << i << "," << h;
      }
    }
  }
  return seen;
}

TEST(PlanAttentionTilesTest, CoversEveryRowOnceLargestFirst) {
  // A decode row, a prefill chunk of 40 tokens at position 100, another decode row.
  const std::vector<ChunkSpan> chunks = {
      {.chunk = 0, .first_token = 0, .first_pos = 9, .n_tokens = 1},
      {.chunk = 1, .first_token = 1, .first_pos = 100, .n_tokens = 40},
      {.chunk = 2, .first_token = 41, .first_pos = 3, .n_tokens = 1}};
  const auto tiles = PlanAttentionTiles(kShape, chunks, 16, 4);
  EXPECT_EQ(Covered(tiles, chunks).size(), 42u * kShape.n_heads);
  // (1 + 3 + 1) tiles per KV head: whole GQA groups.
  EXPECT_EQ(tiles.size(), 5u * kShape.n_kv_heads);
  for (size_t i = 1; i < tiles.size(); ++i) EXPECT_GE(tiles[i - 1].cost(), tiles[i].cost());
  EXPECT_EQ(tiles.front().chunk, 1);
}

TEST(PlanAttentionTilesTest, SplitsHeadsWhenGroupsAreFewerThanThreads) {
  const std::vector<ChunkSpan> one_row = {
      {.chunk = 0, .first_token = 0, .first_pos = 500, .n_tokens = 1}};
  const auto few_threads = PlanAttentionTiles(kShape, one_row, 16, 2);
  EXPECT_EQ(few_threads.size(), 2u);  // a tile per KV head
  const auto many_threads = PlanAttentionTiles(kShape, one_row, 16, 8);
  EXPECT_EQ(many_threads.size(), 6u);  // a tile per query head
  EXPECT_EQ(Covered(many_threads, one_row).size(), 6u);
}

}  // namespace
}  // namespace pdserve
