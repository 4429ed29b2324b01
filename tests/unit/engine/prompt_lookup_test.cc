#include "common/engine/prompt_lookup.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace pdserve {
namespace {

using V = std::vector<int32_t>;

TEST(PromptLookupTest, CopiesWhatFollowedTheTail) {
  // The tail "1 2" occurred at the start, followed by 3 4 5.
  EXPECT_EQ(PromptLookupDraft(V{1, 2, 3, 4, 5, 9, 1, 2}, 2, 4, 3), (V{3, 4, 5}));
}

TEST(PromptLookupTest, NoEarlierOccurrenceNoDraft) {
  EXPECT_TRUE(PromptLookupDraft(V{1, 2, 3, 4, 5, 6}, 2, 4, 8).empty());
  EXPECT_TRUE(PromptLookupDraft(V{}, 1, 4, 8).empty());
  EXPECT_TRUE(PromptLookupDraft(V{7}, 1, 4, 8).empty());
  EXPECT_TRUE(PromptLookupDraft(V{1, 2, 1, 2}, 2, 4, 0).empty());
}

TEST(PromptLookupTest, TheLongestTailWins) {
  // "2" alone last occurred before 8; "1 2" occurred before 3.
  const V h = {1, 2, 3, 6, 2, 8, 1, 2};
  EXPECT_EQ(PromptLookupDraft(h, 1, 4, 1), (V{3}));
  EXPECT_EQ(PromptLookupDraft(h, 1, 1, 1), (V{8}));
}

TEST(PromptLookupTest, TailsShorterThanMinNgramAreNotSearched) {
  EXPECT_TRUE(PromptLookupDraft(V{5, 1, 7, 1}, 2, 4, 4).empty());
  EXPECT_EQ(PromptLookupDraft(V{5, 1, 7, 1}, 1, 4, 1), (V{7}));
}

TEST(PromptLookupTest, TheMostRecentOccurrenceWins) {
  const V h = {1, 2, 3, 0, 1, 2, 4, 0, 1, 2};
  EXPECT_EQ(PromptLookupDraft(h, 2, 2, 1), (V{4}));
}

TEST(PromptLookupTest, ACopyReachingTheEndRepeatsThePeriod) {
  // The tail "7 8" last occurred two tokens back: the copy is "7 8" and
  // then itself again.
  EXPECT_EQ(PromptLookupDraft(V{4, 7, 8, 7, 8}, 2, 2, 5), (V{7, 8, 7, 8, 7}));
  EXPECT_EQ(PromptLookupDraft(V{3, 3, 3}, 2, 4, 4), (V{3, 3, 3, 3}));
}

}  // namespace
}  // namespace pdserve
