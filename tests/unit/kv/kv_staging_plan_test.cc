#include "common/kv/kv_staging_plan.h"

#include <numeric>

#include "gtest/gtest.h"

namespace pdserve {
namespace {

TEST(KvStagingPlanTest, RunsAreMaximalInOrderAndCoverEveryBlock) {
  struct Case {
    size_t blocks, block_bytes, capacity;
    std::vector<size_t> run_sizes;
  };
  const Case cases[] = {
      {0, 100, 1000, {}},
      {1, 100, 100, {1}},
      {10, 100, 1000, {10}},
      {10, 100, 999, {9, 1}},
      {25, 12288, 8 << 20, {25}},            // one SmolLM2 prompt layer in 8 MiB
      {1000, 12288, 1 << 20, {85, 85, 85, 85, 85, 85, 85, 85, 85, 85, 85, 65}},
      {7, 3, 7, {2, 2, 2, 1}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<StagingRun>> runs =
        PlanStagingRuns(c.blocks, c.block_bytes, c.capacity);
    ASSERT_TRUE(runs.ok()) << runs.status();
    ASSERT_EQ(runs->size(), c.run_sizes.size()) << c.blocks << " blocks";
    size_t next = 0;
    for (size_t i = 0; i < runs->size(); ++i) {
      const StagingRun& r = (*runs)[i];
      EXPECT_EQ(r.first_block, next);
      EXPECT_EQ(r.num_blocks, c.run_sizes[i]);
      EXPECT_LE(r.bytes(), c.capacity);
      EXPECT_EQ(r.bytes(), r.num_blocks * c.block_bytes);
      next += r.num_blocks;
    }
    EXPECT_EQ(next, c.blocks);
  }
}

TEST(KvStagingPlanTest, BlockLargerThanStagingOrEmptyBlockIsRefused) {
  EXPECT_EQ(PlanStagingRuns(4, 101, 100).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanStagingRuns(4, 0, 100).status().code(), absl::StatusCode::kInvalidArgument);
}

// Sender and receiver plan independently; the runs must agree exactly.
TEST(KvStagingPlanTest, BothEndsDeriveTheSameRuns) {
  for (size_t blocks : {1u, 33u, 512u}) {
    EXPECT_EQ(*PlanStagingRuns(blocks, 12288, 1 << 20), *PlanStagingRuns(blocks, 12288, 1 << 20));
  }
}

}  // namespace
}  // namespace pdserve
