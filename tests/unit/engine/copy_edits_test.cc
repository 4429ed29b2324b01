#include "common/engine/copy_edits.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace pdserve {
namespace {

using V = std::vector<int32_t>;

// A source of 12 tokens, 100..111, then a copy of it so far with 104
// replaced by 7: the draft copied from index 4 (104 105 106) was refused at
// its first token.
struct Copy {
  V history;
  int64_t at;
};
Copy RenamedCopy() {
  Copy c;
  for (int32_t t = 100; t < 112; ++t) c.history.push_back(t);
  c.history.push_back(0);
  for (int32_t t = 100; t < 104; ++t) c.history.push_back(t);
  c.at = static_cast<int64_t>(c.history.size());
  c.history.push_back(7);
  return c;
}

TEST(CopyEditsTest, LearnsAReplacementOnceTheCopyGoesOn) {
  Copy c = RenamedCopy();
  CopyEdits edits;
  edits.OnVerified(c.history, c.at, {4, CopyEdits::kMinAnchor}, V{104, 105, 106}, 0);
  edits.Confirm(c.history);
  EXPECT_TRUE(edits.empty()) << "decided before the confirming tokens were written";
  c.history.insert(c.history.end(), {105, 106});
  edits.Confirm(c.history);
  EXPECT_TRUE(edits.empty());
  c.history.push_back(107);
  edits.Confirm(c.history);
  EXPECT_EQ(edits.Map(104), 7);
  EXPECT_EQ(edits.Map(105), 105);
  EXPECT_EQ(edits.size(), 1u);
}

TEST(CopyEditsTest, ACopyThatDepartsTeachesNothing) {
  Copy c = RenamedCopy();
  CopyEdits edits;
  edits.OnVerified(c.history, c.at, {4, CopyEdits::kMinAnchor}, V{104, 105, 106}, 0);
  c.history.insert(c.history.end(), {105, 9, 107});  // not the source's 105 106 107
  edits.Confirm(c.history);
  EXPECT_TRUE(edits.empty());
  c.history.insert(c.history.end(), {108, 109});
  edits.Confirm(c.history);
  EXPECT_TRUE(edits.empty()) << "a decided replacement must not be decided again";
}

TEST(CopyEditsTest, AWeaklyAnchoredDraftTeachesNothing) {
  Copy c = RenamedCopy();
  CopyEdits edits;
  // Kept tokens count towards the anchor: one short of it in all.
  edits.OnVerified(c.history, c.at - 1, {3, CopyEdits::kMinAnchor - 2}, V{103, 104}, 1);
  c.history.insert(c.history.end(), {105, 106, 107});
  edits.Confirm(c.history);
  EXPECT_TRUE(edits.empty());
  edits.OnVerified(c.history, c.at - 1, {3, CopyEdits::kMinAnchor - 1}, V{103, 104}, 1);
  edits.Confirm(c.history);
  EXPECT_EQ(edits.Map(104), 7);
}

TEST(CopyEditsTest, ARefusedReplacementIsForgotten) {
  Copy c = RenamedCopy();
  CopyEdits edits;
  edits.OnVerified(c.history, c.at, {4, CopyEdits::kMinAnchor}, V{104, 105}, 0);
  c.history.insert(c.history.end(), {105, 106, 107});
  edits.Confirm(c.history);
  ASSERT_EQ(edits.Map(104), 7);
  // Later a draft carried the replacement (7 for 104) and the model wrote
  // the source's own token.
  V h = c.history;
  const auto at = static_cast<int64_t>(h.size());
  h.push_back(104);
  edits.OnVerified(h, at, {4, 1}, V{7}, 0);
  EXPECT_EQ(edits.Map(104), 104);
}

TEST(CopyEditsTest, KeptDraftsAndCopiesOfTheCopyTeachNothing) {
  Copy c = RenamedCopy();
  CopyEdits edits;
  edits.OnVerified(c.history, c.at, {4, 20}, V{7}, 1);  // all kept
  // A source at or past where the draft landed is the copy itself.
  edits.OnVerified(c.history, c.at, {c.at, 20}, V{104}, 0);
  edits.OnVerified(c.history, c.at, {-1, 20}, V{104}, 0);
  c.history.insert(c.history.end(), {105, 106, 107});
  edits.Confirm(c.history);
  EXPECT_TRUE(edits.empty());
}

TEST(CopyEditsTest, TheMapIsBounded) {
  CopyEdits edits;
  V h;
  // Each round: a source a 1 2 3, then its copy with a replaced.
  for (int32_t a = 1000; a < 1000 + static_cast<int32_t>(CopyEdits::kMaxEdits) + 5; ++a) {
    const auto source = static_cast<int64_t>(h.size());
    h.insert(h.end(), {a, 1, 2, 3});
    const auto at = static_cast<int64_t>(h.size());
    h.insert(h.end(), {a + 5000, 1, 2, 3});
    edits.OnVerified(h, at, {source, 20}, V{a}, 0);
    edits.Confirm(h);
  }
  EXPECT_EQ(edits.size(), CopyEdits::kMaxEdits);
}

}  // namespace
}  // namespace pdserve
