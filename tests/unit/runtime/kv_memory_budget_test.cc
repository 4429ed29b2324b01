#include "common/runtime/kv_memory_budget.h"

#include <cstdint>

#include "common/runtime/runtime_factory.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

// SmolLM2's f16 layout: 30 layers x 2 (K, V) x 3 heads x 64 x 2 bytes x 16
// tokens = 368,640 bytes a block.
TEST(KvMemoryBudgetTest, TakesTheShareOfFreeMemoryInWholeBlocks) {
  const KvLayout layout = KvLayout::SmolLm2(16);
  const size_t block = KvCache::PoolBytes(layout, 1);
  ASSERT_EQ(block, 368640u);
  // A fake 80 GB card with 76 GiB free once the weights are in.
  absl::StatusOr<int32_t> blocks = KvBlocksForMemory(layout, 0.85, 76 * kGiB);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ(*blocks, static_cast<int32_t>(0.85 * 76 * kGiB / block));
  EXPECT_LE(KvCache::PoolBytes(layout, *blocks), static_cast<size_t>(0.85 * 76 * kGiB));
  EXPECT_GT(KvCache::PoolBytes(layout, *blocks + 1), static_cast<size_t>(0.85 * 76 * kGiB));
  // Half the free memory gives half the blocks (to a block).
  const int32_t half = *KvBlocksForMemory(layout, 0.425, 76 * kGiB);
  EXPECT_NEAR(half, *blocks / 2, 1);
}

TEST(KvMemoryBudgetTest, Int8BlocksAreSmallerSoMoreFit) {
  KvLayout f16 = KvLayout::SmolLm2(16);
  KvLayout int8 = f16;
  int8.dtype = "int8";
  EXPECT_GT(*KvBlocksForMemory(int8, 0.5, 8 * kGiB), *KvBlocksForMemory(f16, 0.5, 8 * kGiB));
}

TEST(KvMemoryBudgetTest, LessThanOneBlockIsRefused) {
  const KvLayout layout = KvLayout::SmolLm2(16);
  absl::StatusOr<int32_t> blocks = KvBlocksForMemory(layout, 0.5, 100000);
  EXPECT_EQ(blocks.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(blocks.status().message().find("less than one KV block"), std::string::npos);
}

TEST(KvMemoryBudgetTest, FractionsOutsideTheOpenUnitRangeAreRefused) {
  const KvLayout layout = KvLayout::SmolLm2(16);
  for (double f : {0.0, 1.0, 1.5, -0.1}) {
    EXPECT_EQ(KvBlocksForMemory(layout, f, 8 * kGiB).status().code(),
              absl::StatusCode::kInvalidArgument)
        << f;
  }
}

TEST(KvMemoryBudgetTest, TheFlagIsForCudaDevicesOnly) {
  EngineRuntimeFlags flags;
  flags.kv_memory_fraction = 0.8;
  flags.device = "cpu";
  const absl::Status cpu = flags.Validate();
  EXPECT_EQ(cpu.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cpu.message().find("--kv_blocks"), std::string::npos) << cpu;
  flags.device = "cuda:0";
  EXPECT_TRUE(flags.Validate().ok());
  flags.kv_memory_fraction = 1.2;
  EXPECT_EQ(flags.Validate().code(), absl::StatusCode::kInvalidArgument);
  flags.kv_memory_fraction = 0;  // unset: --kv_blocks, on any device
  flags.device = "cpu";
  EXPECT_TRUE(flags.Validate().ok());
}

}  // namespace
}  // namespace pdserve
