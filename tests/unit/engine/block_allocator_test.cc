#include "common/engine/block_allocator.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

void ExpectCounts(const BlockAllocator& a, int32_t used) {
  EXPECT_EQ(a.num_used(), used);
  EXPECT_EQ(a.num_free(), a.num_blocks() - used);
}

TEST(BlockAllocatorTest, StartsAllFree) {
  BlockAllocator a(8);
  EXPECT_EQ(a.num_blocks(), 8);
  ExpectCounts(a, 0);
  for (int32_t b = 0; b < 8; ++b) EXPECT_EQ(a.refcount(b), 0);
}

TEST(BlockAllocatorTest, AllocateGivesDistinctValidBlocksWithRefcountOne) {
  BlockAllocator a(10);
  auto x = a.Allocate(4);
  ASSERT_TRUE(x.ok()) << x.status();
  auto y = a.Allocate(6);
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(x->size(), 4u);
  ASSERT_EQ(y->size(), 6u);
  std::set<int32_t> all(x->begin(), x->end());
  all.insert(y->begin(), y->end());
  EXPECT_EQ(all.size(), 10u);
  for (int32_t b : all) {
    EXPECT_GE(b, 0);
    EXPECT_LT(b, 10);
    EXPECT_EQ(a.refcount(b), 1);
  }
  ExpectCounts(a, 10);
}

TEST(BlockAllocatorTest, AllocateZeroIsEmptyAndChangesNothing) {
  BlockAllocator a(3);
  auto x = a.Allocate(0);
  ASSERT_TRUE(x.ok());
  EXPECT_TRUE(x->empty());
  ExpectCounts(a, 0);
}

TEST(BlockAllocatorTest, ExhaustionLeavesStateUnchanged) {
  BlockAllocator a(5);
  auto x = a.Allocate(3);
  ASSERT_TRUE(x.ok());
  std::vector<int32_t> before;
  for (int32_t b = 0; b < 5; ++b) before.push_back(a.refcount(b));
  for (int32_t n : {3, 4, 100, -1}) {
    auto y = a.Allocate(n);
    ASSERT_FALSE(y.ok()) << n;
    if (n > 0) EXPECT_EQ(y.status().code(), absl::StatusCode::kResourceExhausted) << y.status();
    ExpectCounts(a, 3);
    for (int32_t b = 0; b < 5; ++b) EXPECT_EQ(a.refcount(b), before[b]);
  }
  auto rest = a.Allocate(2);  // exactly what is left still works
  ASSERT_TRUE(rest.ok());
  ExpectCounts(a, 5);
  EXPECT_EQ(a.Allocate(1).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(BlockAllocatorTest, UnrefReturnsBlocksToThePool) {
  BlockAllocator a(4);
  auto x = a.Allocate(4);
  ASSERT_TRUE(x.ok());
  EXPECT_TRUE(a.Unref((*x)[1]));
  ExpectCounts(a, 3);
  EXPECT_EQ(a.refcount((*x)[1]), 0);
  auto y = a.Allocate(1);  // the freed block is the one handed out again
  ASSERT_TRUE(y.ok());
  EXPECT_EQ((*y)[0], (*x)[1]);
  a.UnrefAll(*x);
  ExpectCounts(a, 0);
}

TEST(BlockAllocatorTest, SharedBlocksFreeOnLastUnref) {
  BlockAllocator a(4);
  auto x = a.Allocate(2);
  ASSERT_TRUE(x.ok());
  const int32_t b = (*x)[0];
  a.Ref(b);
  a.Ref(b);
  EXPECT_EQ(a.refcount(b), 3);
  ExpectCounts(a, 2);
  EXPECT_FALSE(a.Unref(b));
  EXPECT_FALSE(a.Unref(b));
  EXPECT_EQ(a.refcount(b), 1);
  ExpectCounts(a, 2);
  EXPECT_TRUE(a.Unref(b));
  ExpectCounts(a, 1);
  // A shared block never shows up twice in the free list.
  a.Unref((*x)[1]);
  auto all = a.Allocate(4);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(std::set<int32_t>(all->begin(), all->end()).size(), 4u);
}

TEST(BlockAllocatorTest, RandomisedAccountingNeverLeaksOrDuplicates) {
  constexpr int32_t kBlocks = 64;
  BlockAllocator a(kBlocks);
  std::mt19937 rng(3);
  std::vector<int32_t> refs(kBlocks, 0);  // model of the expected refcounts
  for (int step = 0; step < 20000; ++step) {
    const int op = rng() % 3;
    if (op == 0) {
      const int32_t n = rng() % 6;
      const int32_t free_before = a.num_free();
      auto got = a.Allocate(n);
      if (n > free_before) {
        ASSERT_FALSE(got.ok());
        ASSERT_EQ(a.num_free(), free_before);
        continue;
      }
      ASSERT_TRUE(got.ok());
      for (int32_t b : *got) {
        ASSERT_EQ(refs[b], 0) << "handed out a block in use";
        refs[b] = 1;
      }
    } else {
      std::vector<int32_t> used;
      for (int32_t b = 0; b < kBlocks; ++b) {
        if (refs[b] > 0) used.push_back(b);
      }
      if (used.empty()) continue;
      const int32_t b = used[rng() % used.size()];
      if (op == 1) {
        a.Ref(b);
        ++refs[b];
      } else {
        ASSERT_EQ(a.Unref(b), --refs[b] == 0);
      }
    }
    int32_t in_use = 0;
    for (int32_t b = 0; b < kBlocks; ++b) {
      ASSERT_EQ(a.refcount(b), refs[b]);
      in_use += refs[b] > 0;
    }
    ASSERT_EQ(a.num_used(), in_use);
  }
}

TEST(BlockAllocatorDeathTest, DoubleFreeDies) {
  BlockAllocator a(2);
  auto x = a.Allocate(1);
  ASSERT_TRUE(x.ok());
  const int32_t b = (*x)[0];
  a.Unref(b);
  EXPECT_DEATH(a.Unref(b), "double free of kv block");
}

TEST(BlockAllocatorDeathTest, RefOfFreeBlockDies) {
  BlockAllocator a(2);
  EXPECT_DEATH(a.Ref(1), "ref of free kv block");
}

// --- prefix cache: cached blocks are parked, not emptied, and evicted LRU.

const std::vector<int32_t> kTokens = {1, 2, 3};

TEST(BlockAllocatorTest, CachedBlockIsParkedOnLastUnrefAndCountsAsFree) {
  BlockAllocator a(4);
  auto x = a.Allocate(2);
  ASSERT_TRUE(x.ok());
  a.Publish((*x)[0], 42, kTokens);
  a.Ref((*x)[0]);  // a second sequence shares it
  EXPECT_EQ(a.num_cached(), 1);
  EXPECT_EQ(a.num_cached_free(), 0);
  EXPECT_FALSE(a.Unref((*x)[0]));
  EXPECT_TRUE(a.Unref((*x)[0]));
  EXPECT_TRUE(a.Unref((*x)[1]));
  ExpectCounts(a, 0);  // parked blocks are free: the pool bound is unchanged
  EXPECT_EQ(a.num_cached_free(), 1);
  EXPECT_EQ(a.FindCached(42, kTokens), (*x)[0]);
  // Taken back into use by a later prompt.
  a.Ref((*x)[0]);
  EXPECT_EQ(a.refcount((*x)[0]), 1);
  EXPECT_EQ(a.num_cached_free(), 0);
  ExpectCounts(a, 1);
  a.Unref((*x)[0]);
}

TEST(BlockAllocatorTest, AllocationUsesEmptyBlocksBeforeEvictingLeastRecentlyParked) {
  BlockAllocator a(4);
  auto x = a.Allocate(4);
  ASSERT_TRUE(x.ok());
  for (int i = 0; i < 3; ++i) a.Publish((*x)[i], 100 + i, kTokens);
  // Released in reverse (UnrefAll): block 2 parked first, then 1, then 0;
  // block 3 holds no key and is simply empty.
  a.UnrefAll(*x);
  ExpectCounts(a, 0);
  EXPECT_EQ(a.num_cached_free(), 3);
  auto y = a.Allocate(1);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ((*y)[0], (*x)[3]);  // the empty block, no eviction
  EXPECT_EQ(a.num_cached(), 3);
  auto z = a.Allocate(2);
  ASSERT_TRUE(z.ok());
  // The deepest blocks go first, the shared head of the prefix survives.
  EXPECT_EQ(*z, (std::vector<int32_t>{(*x)[2], (*x)[1]}));
  EXPECT_EQ(a.FindCached(102, kTokens), -1);
  EXPECT_EQ(a.FindCached(101, kTokens), -1);
  EXPECT_EQ(a.FindCached(100, kTokens), (*x)[0]);
  for (int32_t b : *z) EXPECT_EQ(a.refcount(b), 1);
  EXPECT_EQ(a.num_cached(), 1);
  // Evicted blocks come back empty: releasing them parks nothing.
  a.UnrefAll(*z);
  a.UnrefAll(*y);
  EXPECT_EQ(a.num_cached_free(), 1);
  ExpectCounts(a, 0);
}

TEST(BlockAllocatorTest, ReuseRefreshesTheLruPosition) {
  BlockAllocator a(2);
  auto x = a.Allocate(2);
  ASSERT_TRUE(x.ok());
  a.Publish((*x)[0], 1, kTokens);
  a.Publish((*x)[1], 2, kTokens);
  a.Unref((*x)[0]);  // parked first: the oldest
  a.Unref((*x)[1]);
  a.Ref((*x)[0]);  // a hit
  a.Unref((*x)[0]);  // now the most recent
  auto y = a.Allocate(1);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ((*y)[0], (*x)[1]);
  EXPECT_EQ(a.FindCached(1, kTokens), (*x)[0]);
}

TEST(BlockAllocatorTest, ExhaustionWithCachedBlocksEvictsNothing) {
  BlockAllocator a(3);
  auto x = a.Allocate(3);
  ASSERT_TRUE(x.ok());
  a.Publish((*x)[0], 9, kTokens);
  a.Unref((*x)[0]);
  EXPECT_EQ(a.Allocate(2).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(a.FindCached(9, kTokens), (*x)[0]);
  EXPECT_EQ(a.num_cached_free(), 1);
}

TEST(BlockAllocatorTest, PublishingAKeyTwiceKeepsTheFirstBlock) {
  BlockAllocator a(2);
  auto x = a.Allocate(2);
  ASSERT_TRUE(x.ok());
  a.Publish((*x)[0], 5, kTokens);
  a.Publish((*x)[1], 5, kTokens);  // recomputed copy of the same prefix
  a.UnrefAll(*x);
  EXPECT_EQ(a.num_cached_free(), 1);  // the copy went back empty
  EXPECT_EQ(a.FindCached(5, kTokens), (*x)[0]);
}

TEST(BlockAllocatorDeathTest, PublishingAnUnusedBlockDies) {
  BlockAllocator a(2);
  EXPECT_DEATH(a.Publish(0, 1, kTokens), "publish of unused kv block 0");
}

// Capacity is bytes: 8 ids share a budget of 4 blocks of 100 bytes. Blocks
// whose windows went back refund what was given back, and the room they
// leave takes more blocks than the budget counts, never more bytes.
TEST(BlockAllocatorWindowTest, RefundedWindowBytesMakeRoomForMoreBlocks) {
  BlockAllocator a(/*num_ids=*/8, /*budget_blocks=*/4, /*block_bytes=*/100);
  EXPECT_EQ(a.num_blocks(), 4);
  EXPECT_EQ(a.num_ids(), 8);
  EXPECT_EQ(a.num_free(), 4);
  auto x = a.Allocate(4);
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(a.num_free(), 0) << "four ids are empty, but the budget is spent";
  EXPECT_FALSE(a.Allocate(1).ok());

  a.MarkWindowReleased((*x)[0], 60);
  EXPECT_EQ(a.num_free(), 0) << "60 bytes are not a block";
  a.MarkWindowReleased((*x)[1], 60);
  a.MarkWindowReleased((*x)[1], 60);  // once per allocation
  EXPECT_EQ(a.charged_bytes(), 280);
  EXPECT_EQ(a.num_free(), 1);
  auto y = a.Allocate(1);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(a.charged_bytes(), 380);
  EXPECT_EQ(a.num_free(), 0);
  EXPECT_EQ(a.num_used(), 4) << "used is the budget's share, in blocks";

  a.MarkWindowReleased((*y)[0], 1000);  // refunds at most its charge
  EXPECT_EQ(a.charged_bytes(), 280);
  a.UnrefAll(*x);
  a.UnrefAll(*y);
  EXPECT_EQ(a.charged_bytes(), 0);
  EXPECT_EQ(a.num_free(), 4);
  // Reallocated, a released block charges its full bytes again.
  auto z = a.Allocate(4);
  ASSERT_TRUE(z.ok());
  for (int32_t b : *z) EXPECT_FALSE(a.window_released(b));
  EXPECT_EQ(a.charged_bytes(), 400);
}

// Parked cached blocks keep their (possibly refunded) charge until they are
// evicted; an allocation evicts them for room as it does for ids.
TEST(BlockAllocatorWindowTest, ParkedBlocksAreEvictedForRoom) {
  BlockAllocator a(/*num_ids=*/8, /*budget_blocks=*/4, /*block_bytes=*/100);
  auto x = a.Allocate(3);
  ASSERT_TRUE(x.ok());
  const int32_t tokens[] = {1, 2};
  a.Publish((*x)[0], 11, tokens);
  a.Publish((*x)[1], 12, tokens);
  a.MarkWindowReleased((*x)[0], 50);
  a.UnrefAll(*x);
  EXPECT_EQ(a.num_cached_free(), 2);
  EXPECT_EQ(a.charged_bytes(), 150) << "parked blocks hold their KV";
  EXPECT_EQ(a.num_free(), 4) << "but count as free: they are evicted for room";
  auto y = a.Allocate(4);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(a.num_cached_free(), 0);
  EXPECT_EQ(a.charged_bytes(), 400);
  EXPECT_EQ(a.FindCached(11, tokens), -1);
}

// Random traffic with window releases: the charge never passes the budget,
// num_free never promises what Allocate cannot give, and all comes back.
TEST(BlockAllocatorWindowTest, RandomisedChargesStayWithinTheBudget) {
  std::mt19937 rng(7);
  BlockAllocator a(/*num_ids=*/48, /*budget_blocks=*/16, /*block_bytes=*/64);
  std::vector<std::vector<int32_t>> seqs;
  for (int step = 0; step < 4000; ++step) {
    const int op = static_cast<int>(rng() % 4);
    if (op == 0 || seqs.empty()) {
      const auto n = static_cast<int32_t>(rng() % 5);
      const int32_t free_before = a.num_free();
      auto got = a.Allocate(n);
      ASSERT_EQ(got.ok(), n <= free_before);
      if (got.ok()) seqs.push_back(*got);
    } else if (op == 1) {
      auto& s = seqs[rng() % seqs.size()];
      if (!s.empty()) a.MarkWindowReleased(s[rng() % s.size()], 16 * (rng() % 5));
    } else if (op == 2) {
      auto& s = seqs[rng() % seqs.size()];
      if (!s.empty()) {
        const int32_t tokens[] = {static_cast<int32_t>(step)};
        a.Publish(s[0], static_cast<uint64_t>(step), tokens);
      }
    } else {
      const size_t i = rng() % seqs.size();
      a.UnrefAll(seqs[i]);
      seqs.erase(seqs.begin() + static_cast<std::ptrdiff_t>(i));
    }
    ASSERT_LE(a.charged_bytes(), int64_t{16} * 64) << "step " << step;
    ASSERT_GE(a.num_free(), 0);
  }
  for (auto& s : seqs) a.UnrefAll(s);
  EXPECT_EQ(a.num_free(), 16);
}

}  // namespace
}  // namespace pdserve
