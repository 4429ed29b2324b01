#include "common/engine/suffix_cache.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace pdserve {
namespace {

using V = std::vector<int32_t>;

TEST(SuffixCacheTest, DraftsWhatFollowedTheSameTailElsewhere) {
  SuffixCache cache(1000, 2, 4);
  // Prompt tail 7 8, then the output 1 2 3 4 5.
  cache.Add(V{7, 8, 1, 2, 3, 4, 5}, 2);
  EXPECT_EQ(cache.Draft(V{9, 9, 1, 2}, 8), (V{3, 4, 5}));
  // A context that began in the prompt predicts the output's start.
  EXPECT_EQ(cache.Draft(V{7, 8}, 2), (V{1, 2}));
  EXPECT_TRUE(cache.Draft(V{5, 6}, 8).empty());
  EXPECT_TRUE(cache.Draft(V{1, 2}, 0).empty());
}

TEST(SuffixCacheTest, PromptTokensAreNeverDrafted) {
  SuffixCache cache(1000, 2, 4);
  cache.Add(V{7, 8, 9, 1}, 3);  // prompt 7 8 9, output 1
  // 7 8 was followed by 9 only inside the prompt.
  EXPECT_TRUE(cache.Draft(V{7, 8}, 4).empty());
  EXPECT_EQ(cache.Draft(V{8, 9}, 4), (V{1}));
}

TEST(SuffixCacheTest, TheMajorityFollowerWinsAndASplitStops) {
  SuffixCache cache(1000, 2, 2);
  cache.Add(V{1, 2, 3}, 0);
  cache.Add(V{1, 2, 3}, 0);
  cache.Add(V{1, 2, 4}, 0);
  EXPECT_EQ(cache.Draft(V{1, 2}, 1), (V{3}));  // 2 of 3
  cache.Add(V{1, 2, 4}, 0);
  EXPECT_TRUE(cache.Draft(V{1, 2}, 1).empty());  // 2 of 4: no majority
}

TEST(SuffixCacheTest, TheLongestKnownContextDecides) {
  SuffixCache cache(1000, 1, 3);
  cache.Add(V{5, 6, 7}, 0);
  cache.Add(V{9, 6, 8}, 0);
  cache.Add(V{9, 6, 8}, 0);
  // "6" alone is followed by 8 more often, "5 6" only by 7.
  EXPECT_EQ(cache.Draft(V{5, 6}, 1), (V{7}));
  EXPECT_EQ(cache.Draft(V{4, 6}, 1), (V{8}));
}

TEST(SuffixCacheTest, OldOutputsAreDroppedPastCapacity) {
  SuffixCache cache(8, 2, 2);
  cache.Add(V{1, 2, 3, 4}, 0);
  EXPECT_EQ(cache.Draft(V{1, 2}, 2), (V{3, 4}));
  cache.Add(V{5, 6, 7, 8}, 0);
  EXPECT_EQ(cache.size_tokens(), 8);
  cache.Add(V{9, 10, 11}, 0);  // over 8: the first output goes
  EXPECT_EQ(cache.size_tokens(), 7);
  EXPECT_TRUE(cache.Draft(V{1, 2}, 2).empty());
  EXPECT_EQ(cache.Draft(V{5, 6}, 2), (V{7, 8}));
  SuffixCache off(0, 2, 2);
  off.Add(V{1, 2, 3}, 0);
  EXPECT_TRUE(off.Draft(V{1, 2}, 2).empty());
}

}  // namespace
}  // namespace pdserve
