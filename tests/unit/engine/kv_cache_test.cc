#include "common/engine/kv_cache.h"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/model/model_config.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

KvLayout SmolLm2Layout() {
  ModelConfig c;
  c.n_layers = 30;
  c.n_kv_heads = 3;
  c.head_dim = 64;
  c.n_heads = 9;
  return KvLayout::ForModel(c, 16);
}

TEST(KvLayoutTest, SmolLm2ByteMath) {
  const KvLayout l = SmolLm2Layout();
  EXPECT_EQ(l.n_layers, 30);
  EXPECT_EQ(l.n_kv_heads, 3);
  EXPECT_EQ(l.head_dim, 64);
  EXPECT_EQ(l.block_size, 16);
  EXPECT_EQ(l.dtype, "f16");
  EXPECT_EQ(l.kv_dim(), 192);
  EXPECT_EQ(l.elem_bytes(), 2);
  EXPECT_EQ(l.bytes_per_token(), 23040);  // 30 x 192 x 2 (K and V) x 2 bytes
  EXPECT_EQ(l.bytes_per_layer_block(), 12288);
  EXPECT_EQ(l.bytes_per_layer_block() * l.n_layers, l.bytes_per_token() * l.block_size);
  // The benchmarks' shorthand is the same layout.
  EXPECT_EQ(KvLayout::SmolLm2(), l);
}

// int8: one byte per element plus an f32 scale per (token, kv head) for K
// and for V: (192 + 3 * 4) bytes per row instead of 192 * 2.
TEST(KvLayoutTest, SmolLm2Int8ByteMath) {
  KvLayout l = SmolLm2Layout();
  l.dtype = kKvDtypeInt8;
  EXPECT_TRUE(l.is_int8());
  EXPECT_EQ(l.elem_bytes(), 1);
  EXPECT_EQ(l.row_bytes(), 204);
  EXPECT_EQ(l.bytes_per_token(), 12240);
  EXPECT_EQ(l.bytes_per_layer_block(), 6528);
  EXPECT_EQ(l.bytes_per_layer_block() * l.n_layers, l.bytes_per_token() * l.block_size);
  EXPECT_LT(2 * l.bytes_per_token(), SmolLm2Layout().bytes_per_token() * 107 / 100);
}

TEST(KvCacheTest, Int8ScalesFollowTheRowsInsideTheLayerBlock) {
  KvLayout l = SmolLm2Layout();
  l.dtype = kKvDtypeInt8;
  auto cache = KvCache::Create(l, 3);
  ASSERT_TRUE(cache.ok()) << cache.status();
  KvCache& c = **cache;
  const auto at = [&](const void* p) {
    return static_cast<const uint8_t*>(p) - c.LayerBlock(1, 2);
  };
  EXPECT_EQ(at(c.K8(1, 2)), 0);
  EXPECT_EQ(at(c.V8(1, 2)), 16 * 192);
  EXPECT_EQ(at(c.KScales(1, 2)), 2 * 16 * 192);
  EXPECT_EQ(at(c.VScales(1, 2)), 2 * 16 * 192 + 16 * 3 * 4);
  EXPECT_EQ(at(c.VScales(1, 2) + 16 * 3), l.bytes_per_layer_block());
}

TEST(KvCacheTest, RejectsUnknownDtype) {
  KvLayout l = SmolLm2Layout();
  l.dtype = "bf16";
  EXPECT_EQ(KvCache::Create(l, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateKvDtype("int8").ok());
  EXPECT_TRUE(ValidateKvDtype("f16").ok());
  EXPECT_EQ(ValidateKvDtype("fp8").code(), absl::StatusCode::kInvalidArgument);
}

TEST(KvLayoutTest, EqualityAndDebugString) {
  KvLayout a = SmolLm2Layout(), b = SmolLm2Layout();
  EXPECT_EQ(a, b);
  b.block_size = 32;
  EXPECT_NE(a, b);
  b = a;
  b.dtype = "bf16";
  EXPECT_NE(a, b);
  b.dtype = kKvDtypeInt8;
  EXPECT_NE(a, b);
  const std::string s = a.DebugString();
  for (const char* part : {"layers=30", "kv_heads=3", "head_dim=64", "block_size=16", "f16"}) {
    EXPECT_NE(s.find(part), std::string::npos) << s;
  }
}

TEST(KvLayoutTest, BlocksForTokens) {
  EXPECT_EQ(BlocksForTokens(0, 16), 0);
  EXPECT_EQ(BlocksForTokens(1, 16), 1);
  EXPECT_EQ(BlocksForTokens(16, 16), 1);
  EXPECT_EQ(BlocksForTokens(17, 16), 2);
  EXPECT_EQ(BlocksForTokens(8192, 16), 512);
  EXPECT_EQ(BlocksForTokens(5, 1), 5);
}

TEST(KvCacheTest, RejectsBadSizes) {
  const KvLayout good = SmolLm2Layout();
  EXPECT_EQ(KvCache::Create(good, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvCache::Create(good, -1).status().code(), absl::StatusCode::kInvalidArgument);
  KvLayout bad = good;
  bad.block_size = 0;
  EXPECT_EQ(KvCache::Create(bad, 4).status().code(), absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.n_layers = 0;
  EXPECT_EQ(KvCache::Create(bad, 4).status().code(), absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.n_kv_heads = 0;
  EXPECT_EQ(KvCache::Create(bad, 4).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KvCacheTest, OwnsAnAllocatorOfTheRightSize) {
  auto cache = KvCache::Create(SmolLm2Layout(), 7);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ((*cache)->num_blocks(), 7);
  EXPECT_EQ((*cache)->allocator().num_blocks(), 7);
  EXPECT_EQ((*cache)->allocator().num_free(), 7);
  EXPECT_EQ((*cache)->layout(), SmolLm2Layout());
}

TEST(KvCacheTest, LayerBlocksAreContiguousKThenVAndDisjoint) {
  const KvLayout layout = SmolLm2Layout();
  constexpr int32_t kBlocks = 5;
  auto created = KvCache::Create(layout, kBlocks);
  ASSERT_TRUE(created.ok()) << created.status();
  KvCache& cache = **created;
  const int64_t span = layout.bytes_per_layer_block();
  const int64_t half = span / 2;
  const uint8_t* lo = cache.LayerBlock(0, 0);
  const uint8_t* hi = lo + span * kBlocks * layout.n_layers;
  std::vector<std::pair<const uint8_t*, const uint8_t*>> spans;
  for (int l = 0; l < layout.n_layers; ++l) {
    for (int32_t b = 0; b < kBlocks; ++b) {
      const uint8_t* base = cache.LayerBlock(l, b);
      const auto* k = reinterpret_cast<const uint8_t*>(cache.K(l, b));
      const auto* v = reinterpret_cast<const uint8_t*>(cache.V(l, b));
      EXPECT_EQ(k, base);
      EXPECT_EQ(v, base + half) << "V must follow K's block_size x kv_dim f16 rows";
      EXPECT_EQ(half, layout.block_size * layout.kv_dim() * 2);
      EXPECT_GE(base, lo);
      EXPECT_LE(base + span, hi);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % 2, 0u);
      spans.emplace_back(base, base + span);
    }
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    EXPECT_LE(spans[i - 1].second, spans[i].first) << "overlapping (layer, block) spans";
  }
}

TEST(KvCacheTest, WritesStayInTheirBlock) {
  KvLayout layout;
  layout.n_layers = 3;
  layout.n_kv_heads = 2;
  layout.head_dim = 8;
  layout.block_size = 4;
  constexpr int32_t kBlocks = 6;
  auto created = KvCache::Create(layout, kBlocks);
  ASSERT_TRUE(created.ok()) << created.status();
  KvCache& cache = **created;
  const int64_t n = layout.block_size * layout.kv_dim();
  auto tag = [&](int l, int32_t b, int kv) {
    return static_cast<uint16_t>(1 + (l * 100 + b) * 2 + kv);
  };
  for (int l = 0; l < layout.n_layers; ++l) {
    for (int32_t b = 0; b < kBlocks; ++b) {
      for (int64_t i = 0; i < n; ++i) {
        cache.K(l, b)[i] = tag(l, b, 0);
        cache.V(l, b)[i] = tag(l, b, 1);
      }
    }
  }
  for (int l = 0; l < layout.n_layers; ++l) {
    for (int32_t b = 0; b < kBlocks; ++b) {
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(cache.K(l, b)[i], tag(l, b, 0)) << l << " " << b << " " << i;
        ASSERT_EQ(cache.V(l, b)[i], tag(l, b, 1)) << l << " " << b << " " << i;
      }
    }
  }
}

TEST(KvCacheTest, FreshMemoryIsZero) {
  KvLayout layout;
  layout.n_layers = 2;
  layout.n_kv_heads = 1;
  layout.head_dim = 4;
  auto created = KvCache::Create(layout, 3);
  ASSERT_TRUE(created.ok());
  const uint8_t* p = (*created)->LayerBlock(0, 0);
  const int64_t total = layout.bytes_per_layer_block() * 3 * layout.n_layers;
  for (int64_t i = 0; i < total; ++i) ASSERT_EQ(p[i], 0) << i;
}

}  // namespace
}  // namespace pdserve
