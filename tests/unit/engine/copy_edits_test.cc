#include "common/engine/copy_edits.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace pdserve {
namespace {

using V = std::vector<int32_t>;

// A source of 12 tokens, 100..111, then a copy of it so far: 100..103 and
// then 7 where the source has 104. The draft copied from index 4
// (104 105 106) was refused at its first token.
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

// `n` tokens copied as is from `index` on, after a match of `match`.
CopySource Plain(int64_t index, int n, int32_t match) {
  CopySource s;
  s.match = match;
  for (int i = 0; i < n; ++i) {
    s.index.push_back(index + i);
    s.edited.push_back(-1);
  }
  return s;
}

// A one-token draft that carried a learned edit (its first replacement
// token), read from `index`.
CopySource Carried(int64_t index) {
  CopySource s;
  s.match = 1;
  s.index = {index};
  s.edited = {0};
  return s;
}

// The edits taught by RenamedCopy's refused draft (104 105, anchored) once
// the model went on with `then`.
CopyEdits Taught(Copy& c, const V& then) {
  CopyEdits edits;
  edits.OnVerified(c.history, c.at, Plain(4, 2, CopyEdits::kMinAnchor), V{104, 105}, 0);
  c.history.insert(c.history.end(), then.begin(), then.end());
  edits.Confirm(c.history);
  return edits;
}

// What `edits` make of the source's first 12 tokens.
V ReadSource(CopyEdits& edits, const Copy& c) {
  return edits.Read(V(c.history.begin(), c.history.begin() + 12)).tokens;
}

TEST(CopyEditsTest, LearnsAOneForOneEditOnceTheCopyGoesOn) {
  Copy c = RenamedCopy();
  CopyEdits edits;
  edits.OnVerified(c.history, c.at, Plain(4, 3, CopyEdits::kMinAnchor), V{104, 105, 106}, 0);
  c.history.insert(c.history.end(), {105, 106, 107, 108, 109});
  edits.Confirm(c.history);
  EXPECT_TRUE(edits.empty()) << "decided before every span could be checked";
  c.history.push_back(110);
  edits.Confirm(c.history);
  ASSERT_EQ(edits.size(), 1u);
  EXPECT_EQ(ReadSource(edits, c), (V{100, 101, 102, 103, 7, 105, 106, 107, 108, 109, 110, 111}));
}

TEST(CopyEditsTest, LearnsEditsOfDifferentLengths) {
  // One source token written as three (`(vals` -> `(me` `asure` `ments`).
  Copy c = RenamedCopy();
  CopyEdits edits = Taught(c, {8, 9, 105, 106, 107, 108});
  ASSERT_EQ(edits.size(), 1u);
  EXPECT_EQ(ReadSource(edits, c),
            (V{100, 101, 102, 103, 7, 8, 9, 105, 106, 107, 108, 109, 110, 111}));
  // Two source tokens written as one.
  Copy d = RenamedCopy();
  CopyEdits fewer = Taught(d, {106, 107, 108, 109, 110, 111});
  ASSERT_EQ(fewer.size(), 1u);
  EXPECT_EQ(ReadSource(fewer, d), (V{100, 101, 102, 103, 7, 106, 107, 108, 109, 110, 111}));
}

TEST(CopyEditsTest, ACopyThatDepartsTeachesNothing) {
  Copy c = RenamedCopy();
  CopyEdits edits;
  edits.OnVerified(c.history, c.at, Plain(4, 3, CopyEdits::kMinAnchor), V{104, 105, 106}, 0);
  c.history.insert(c.history.end(), {50, 51, 52, 53, 54, 55, 56, 57});  // never the source again
  edits.Confirm(c.history);
  EXPECT_TRUE(edits.empty());
  c.history.insert(c.history.end(), {105, 106, 107, 108});
  edits.Confirm(c.history);
  EXPECT_TRUE(edits.empty()) << "a decided edit must not be decided again";
}

TEST(CopyEditsTest, AWeaklyAnchoredDraftTeachesNothing) {
  Copy c = RenamedCopy();
  CopyEdits edits;
  // Kept tokens count towards the anchor: one short of it in all.
  edits.OnVerified(c.history, c.at - 1, Plain(3, 2, CopyEdits::kMinAnchor - 2), V{103, 104}, 1);
  c.history.insert(c.history.end(), {105, 106, 107, 108, 109, 110});
  edits.Confirm(c.history);
  EXPECT_TRUE(edits.empty());
  edits.OnVerified(c.history, c.at - 1, Plain(3, 2, CopyEdits::kMinAnchor - 1), V{103, 104}, 1);
  edits.Confirm(c.history);
  EXPECT_EQ(edits.size(), 1u);
}

TEST(CopyEditsTest, ARefusedEditIsForgotten) {
  Copy c = RenamedCopy();
  CopyEdits edits = Taught(c, {105, 106, 107, 108, 109, 110});
  ASSERT_EQ(edits.size(), 1u);
  // Later a draft carried the edit (7 for 104) and the model wrote the
  // source's own token.
  V h = c.history;
  const auto at = static_cast<int64_t>(h.size());
  h.push_back(104);
  edits.OnVerified(h, at, Carried(4), V{7}, 0);
  EXPECT_TRUE(edits.empty());
}

TEST(CopyEditsTest, KeptDraftsAndCopiesOfTheCopyTeachNothing) {
  Copy c = RenamedCopy();
  CopyEdits edits;
  edits.OnVerified(c.history, c.at, Plain(4, 1, 20), V{7}, 1);  // all kept
  // A source at or past where the draft landed is the copy itself.
  edits.OnVerified(c.history, c.at, Plain(c.at, 1, 20), V{104}, 0);
  edits.OnVerified(c.history, c.at, Plain(-1, 1, 20), V{104}, 0);
  edits.OnVerified(c.history, c.at, CopySource{20, {}, {}}, V{104}, 0);  // no origins
  c.history.insert(c.history.end(), {105, 106, 107, 108, 109, 110});
  edits.Confirm(c.history);
  EXPECT_TRUE(edits.empty());
}

TEST(CopyEditsTest, TheEditsAreBounded) {
  CopyEdits edits;
  V h;
  // Each round: a source a 1 2 3 4 5 6 7, then its copy with a replaced.
  for (int32_t a = 1000; a < 1000 + static_cast<int32_t>(CopyEdits::kMaxEdits) + 5; ++a) {
    const auto source = static_cast<int64_t>(h.size());
    h.insert(h.end(), {a, 1, 2, 3, 4, 5, 6, 7});
    const auto at = static_cast<int64_t>(h.size());
    h.insert(h.end(), {a + 5000, 1, 2, 3, 4, 5, 6, 7});
    edits.OnVerified(h, at, Plain(source, 1, 20), V{a}, 0);
    edits.Confirm(h);
  }
  EXPECT_EQ(edits.size(), CopyEdits::kMaxEdits);
}

// Read keeps its reading and goes on from where it could still change. As
// the history grows one token at a time, past edits whose sources the end
// cuts off (104 105 is one), and when earlier history or the edits change,
// the reading must equal one made afresh by a copy that never read.
TEST(CopyEditsTest, ReadingOnEqualsReadingAfresh) {
  Copy c = RenamedCopy();
  CopyEdits edits = Taught(c, {106, 107, 108, 109, 110, 111});  // 104 105 -> 7
  ASSERT_EQ(edits.size(), 1u);
  const CopyEdits pristine = edits;
  auto expect_afresh = [&](const V& h, const CopyEdits& like, const char* when) {
    CopyEdits fresh = like;
    const EditedView want = fresh.Read(h);
    const EditedView& got = edits.Read(h);
    EXPECT_EQ(got.tokens, want.tokens) << when << ", " << h.size() << " tokens";
    EXPECT_EQ(got.index, want.index) << when << ", " << h.size() << " tokens";
    EXPECT_EQ(got.edited, want.edited) << when << ", " << h.size() << " tokens";
  };
  // A stream rich in the edit's source, cut at every length.
  const V stream = {104, 105, 1, 104, 104, 105, 105, 104, 2, 104, 105, 104, 3, 104};
  V h;
  for (int round = 0; round < 3; ++round) {
    for (int32_t t : stream) {
      h.push_back(t);
      expect_afresh(h, pristine, "growing");
    }
  }
  // Earlier history rewritten, then cut back: read again from the start.
  h[2] = 104;
  h[3] = 105;
  expect_afresh(h, pristine, "rewritten");
  h.resize(5);
  expect_afresh(h, pristine, "shortened");
  // The edit refused: nothing is read through it any more.
  const auto at = static_cast<int64_t>(h.size());
  h.push_back(104);
  edits.OnVerified(h, at, Carried(0), V{7}, 0);
  ASSERT_TRUE(edits.empty());
  EXPECT_EQ(edits.Read(h).tokens, h);
}

}  // namespace
}  // namespace pdserve
