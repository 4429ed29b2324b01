#include "common/engine/prefix_cache.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace pdserve {
namespace {

const std::vector<int32_t> kA = {1, 2, 3, 4};
const std::vector<int32_t> kB = {5, 6, 7, 8};

TEST(PrefixCacheTest, FindsByKeyAndTokens) {
  PrefixCache c(4);
  EXPECT_EQ(c.Find(11, kA), -1);
  ASSERT_TRUE(c.Insert(11, kA, 2));
  EXPECT_TRUE(c.Contains(2));
  EXPECT_FALSE(c.Contains(1));
  EXPECT_EQ(c.Find(11, kA), 2);
  // A key collision with other tokens is a miss, not wrong KV.
  EXPECT_EQ(c.Find(11, kB), -1);
  EXPECT_EQ(c.num_cached(), 1);
}

TEST(PrefixCacheTest, FirstCopyOfAKeyStaysTheSharedOne) {
  PrefixCache c(4);
  ASSERT_TRUE(c.Insert(11, kA, 0));
  EXPECT_FALSE(c.Insert(11, kA, 1));  // same key, another block
  EXPECT_FALSE(c.Insert(12, kB, 0));  // block already keyed
  EXPECT_FALSE(c.Contains(1));
  EXPECT_EQ(c.Find(11, kA), 0);
  EXPECT_EQ(c.num_cached(), 1);
}

TEST(PrefixCacheTest, EvictsLeastRecentlyParkedFirst) {
  PrefixCache c(4);
  for (int32_t b = 0; b < 4; ++b) ASSERT_TRUE(c.Insert(100 + b, kA, b));
  c.Park(2);
  c.Park(0);
  c.Park(3);
  EXPECT_EQ(c.num_parked(), 3);
  c.Unpark(0);  // reused: no longer evictable
  c.Park(0);    // released again: now the most recent
  EXPECT_EQ(c.EvictOldest(), 2);
  EXPECT_EQ(c.EvictOldest(), 3);
  // An evicted block is forgotten entirely.
  EXPECT_EQ(c.Find(102, kA), -1);
  EXPECT_FALSE(c.Contains(2));
  EXPECT_TRUE(c.Insert(102, kA, 2));
  EXPECT_EQ(c.EvictOldest(), 0);
  EXPECT_EQ(c.EvictOldest(), -1);
  EXPECT_EQ(c.num_parked(), 0);
  EXPECT_EQ(c.num_cached(), 2);  // blocks 1 and 2, never parked
}

TEST(PrefixCacheDeathTest, ParkingTwiceOrAnUncachedBlockDies) {
  PrefixCache c(2);
  EXPECT_DEATH(c.Park(1), "park of kv block 1");
  ASSERT_TRUE(c.Insert(7, kA, 0));
  c.Park(0);
  EXPECT_DEATH(c.Park(0), "park of kv block 0");
  EXPECT_DEATH(c.Unpark(1), "unpark of kv block 1");
}

// The load report's key summary: in-use blocks first, then parked ones
// newest first, cut at the bound.
TEST(PrefixCacheTest, RecentKeysPutInUseFirstThenNewestParked) {
  PrefixCache c(6);
  for (int32_t b = 0; b < 5; ++b) ASSERT_TRUE(c.Insert(100 + b, kA, b));
  c.Park(1);
  c.Park(3);
  c.Park(0);
  // In use: 2, 4 (block order); parked newest first: 0, 3, 1.
  EXPECT_EQ(c.RecentKeys(10), (std::vector<uint64_t>{102, 104, 100, 103, 101}));
  EXPECT_EQ(c.RecentKeys(3), (std::vector<uint64_t>{102, 104, 100}));
  EXPECT_EQ(c.RecentKeys(1), (std::vector<uint64_t>{102}));
  EXPECT_TRUE(c.RecentKeys(0).empty());
  c.EvictOldest();  // block 1
  EXPECT_EQ(c.RecentKeys(10), (std::vector<uint64_t>{102, 104, 100, 103}));
}

TEST(PrefixCacheTest, VersionMovesOnEveryChangeOfTheSummary) {
  PrefixCache c(2);
  uint64_t v = c.version();
  auto moved = [&] {
    const bool m = c.version() != v;
    v = c.version();
    return m;
  };
  ASSERT_TRUE(c.Insert(1, kA, 0));
  EXPECT_TRUE(moved());
  EXPECT_FALSE(c.Insert(1, kA, 1));  // refused: nothing changed
  EXPECT_FALSE(moved());
  c.Park(0);
  EXPECT_TRUE(moved());
  c.Unpark(0);
  EXPECT_TRUE(moved());
  c.Park(0);
  moved();
  EXPECT_EQ(c.EvictOldest(), 0);
  EXPECT_TRUE(moved());
  EXPECT_EQ(c.EvictOldest(), -1);
  EXPECT_FALSE(moved());
}

}  // namespace
}  // namespace pdserve
