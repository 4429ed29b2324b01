#include "common/engine/prompt_lookup.h"

#include <cstdint>
#include <vector>

#include "common/engine/copy_edits.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

using V = std::vector<int32_t>;

V Draft(const V& history, int32_t min_match, int32_t max_match, int32_t max_len,
        CopyEdits* edits = nullptr) {
  return PromptLookupDraft(history, min_match, max_match, max_len, edits).tokens;
}

TEST(PromptLookupTest, CopiesWhatFollowedTheTail) {
  // The tail "1 2" occurred at the start, followed by 3 4 5.
  const LookupDraft d = PromptLookupDraft(V{1, 2, 3, 4, 5, 9, 1, 2}, 2, 4, 3);
  EXPECT_EQ(d.tokens, (V{3, 4, 5}));
  EXPECT_EQ(d.from.index, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(d.from.edited, (V{-1, -1, -1}));
  EXPECT_EQ(d.from.match, 2);
}

TEST(PromptLookupTest, NoEarlierOccurrenceNoDraft) {
  EXPECT_TRUE(Draft(V{1, 2, 3, 4, 5, 6}, 2, 4, 8).empty());
  EXPECT_TRUE(Draft(V{}, 1, 4, 8).empty());
  EXPECT_TRUE(Draft(V{7}, 1, 4, 8).empty());
  EXPECT_TRUE(Draft(V{1, 2, 1, 2}, 2, 4, 0).empty());
  EXPECT_TRUE(PromptLookupDraft(V{1, 2, 3}, 1, 4, 8).from.index.empty());
}

TEST(PromptLookupTest, TheLongestTailWins) {
  // "2" alone last occurred before 8; "1 2" occurred before 3.
  const V h = {1, 2, 3, 6, 2, 8, 1, 2};
  EXPECT_EQ(Draft(h, 1, 4, 1), (V{3}));
  EXPECT_EQ(Draft(h, 1, 1, 1), (V{8}));
}

TEST(PromptLookupTest, ALongMatchFarBackBeatsAShortOneNearby) {
  // "5 6 1 2" occurred at the start (then 3); "1 2" alone just before (then 9).
  const V h = {5, 6, 1, 2, 3, 0, 1, 2, 9, 0, 5, 6, 1, 2};
  EXPECT_EQ(Draft(h, 2, 32, 1), (V{3}));
  EXPECT_EQ(PromptLookupDraft(h, 2, 32, 1).from.match, 4);
  // Compared over two tokens only, the two places tie and the nearer wins.
  EXPECT_EQ(Draft(h, 2, 2, 1), (V{9}));
}

TEST(PromptLookupTest, TailsShorterThanMinMatchAreNotSearched) {
  EXPECT_TRUE(Draft(V{5, 1, 7, 1}, 2, 4, 4).empty());
  EXPECT_EQ(Draft(V{5, 1, 7, 1}, 1, 4, 1), (V{7}));
}

TEST(PromptLookupTest, TheMostRecentOccurrenceWins) {
  const V h = {1, 2, 3, 0, 1, 2, 4, 0, 1, 2};
  EXPECT_EQ(Draft(h, 2, 2, 1), (V{4}));
  EXPECT_EQ(Draft(h, 2, 32, 1), (V{4}));  // "0 1 2" occurred twice: again the later
}

TEST(PromptLookupTest, ACopyReachingTheEndRepeatsThePeriod) {
  // The tail "7 8" last occurred two tokens back: the copy is "7 8" and
  // then itself again.
  const LookupDraft d = PromptLookupDraft(V{4, 7, 8, 7, 8}, 2, 2, 5);
  EXPECT_EQ(d.tokens, (V{7, 8, 7, 8, 7}));
  EXPECT_EQ(d.from.index, (std::vector<int64_t>{3, 4, -1, -1, -1}));
  EXPECT_EQ(Draft(V{3, 3, 3}, 2, 4, 4), (V{3, 3, 3, 3}));
}

// Learns the edit 10 -> 20 21: the source 1..8 10 11 12 13 was copied as
// 1..8 20 21 11 12 13.
CopyEdits RenameTen() {
  CopyEdits edits;
  V h = {1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 20};
  // The draft 10 11 was copied from index 8 after an 8-token match and
  // placed at 23: its first token was refused (the model wrote 20).
  edits.OnVerified(h, 23, {8, {8, 9}, {-1, -1}}, V{10, 11}, 0);
  h.insert(h.end(), {21, 11, 12, 13, 14, 15});
  edits.Confirm(h);
  return edits;
}

TEST(PromptLookupTest, LearnedEditsCarryIntoTheCopy) {
  CopyEdits edits = RenameTen();
  ASSERT_EQ(edits.size(), 1u);
  // "9 10" read through the edit is "9 20 21"; the tail is "9 20".
  const V h = {9, 10, 11, 10, 3, 0, 9, 20};
  const LookupDraft d = PromptLookupDraft(h, 2, 32, 4, &edits);
  EXPECT_EQ(d.tokens, (V{21, 11, 20, 21}));
  EXPECT_EQ(d.from.index, (std::vector<int64_t>{1, 2, 3, 3}));
  EXPECT_EQ(d.from.edited, (V{1, -1, 0, 1}));
  EXPECT_EQ(d.from.match, 2);
  EXPECT_EQ(Draft(h, 2, 32, 3), V{});  // as is, "9 20" never occurred
  // Through the edits the copy stops at the history's end.
  EXPECT_EQ(Draft(h, 2, 32, 16, &edits), (V{21, 11, 20, 21, 3, 0, 9, 20}));
}

TEST(PromptLookupTest, ALongerPlainMatchBeatsTheEdits) {
  CopyEdits edits = RenameTen();
  // "3 4 20" occurred as such (then 5); read through the edit, "4 10"
  // matches only "4 20" (then 21).
  const V h = {3, 4, 20, 5, 0, 4, 10, 6, 9, 3, 4, 20};
  EXPECT_EQ(Draft(h, 2, 32, 1, &edits), (V{5}));
}

TEST(PromptLookupTest, OnATieTheReadingThatCarriesAnEditWins) {
  CopyEdits edits = RenameTen();
  // "4 20" occurred as such (then 5) and, later, as "4 10" read "4 20 21"
  // (then 21): two tokens matched each way, and what follows the edited
  // place is the replacement the sequence was seen to write.
  EXPECT_EQ(Draft(V{4, 20, 5, 0, 4, 10, 6, 9, 4, 20}, 2, 32, 1, &edits), (V{21}));
  // "4 5" occurred before 8 10, read "8 20 21": a draft of one token is
  // the same either way, a draft of two reaches the edit.
  const V h = {4, 5, 6, 7, 0, 4, 5, 8, 10, 9, 4, 5};
  const LookupDraft one = PromptLookupDraft(h, 2, 32, 1, &edits);
  EXPECT_EQ(one.tokens, (V{8}));
  EXPECT_EQ(one.from.edited, (V{-1}));
  EXPECT_EQ(Draft(h, 2, 32, 2, &edits), (V{8, 20}));
  // Without an edit ahead, a tie reads the history as is: a copy reaching
  // its end still repeats the period (through the edits it would stop).
  EXPECT_EQ(Draft(V{7, 8, 7, 8}, 2, 32, 5, &edits), (V{7, 8, 7, 8, 7}));
}

}  // namespace
}  // namespace pdserve
