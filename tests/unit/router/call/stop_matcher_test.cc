#include "router/call/stop_matcher.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pdserve::router {
namespace {

struct Case {
  std::string name;
  std::vector<std::string> stops;
  std::vector<std::string> pieces;
  std::string want_text;  // everything released, Flush included
  bool want_stopped = false;
};

// Feeds the pieces one by one, checking that released text is always a
// prefix of the final answer (nothing is ever taken back).
void RunCase(const Case& c) {
  SCOPED_TRACE(c.name);
  StopMatcher m(c.stops);
  std::string out;
  for (const std::string& p : c.pieces) {
    StopMatcher::Result r = m.Push(p);
    out += r.text;
    EXPECT_EQ(c.want_text.substr(0, out.size()), out) << "released text that was not final";
    if (r.stopped) break;
  }
  if (!m.stopped()) out += m.Flush();
  EXPECT_EQ(out, c.want_text);
  EXPECT_EQ(m.stopped(), c.want_stopped);
}

TEST(StopMatcherTest, Table) {
  const std::vector<Case> cases = {
      {"no stops", {}, {"Hello", " world"}, "Hello world", false},
      {"no match", {"END"}, {"Hello", " world"}, "Hello world", false},
      {"match inside one piece", {"END"}, {"abcENDxyz"}, "abc", true},
      {"match split across pieces", {"END"}, {"abcE", "N", "Dxyz"}, "abc", true},
      {"partial match that fails is released", {"END"}, {"abcEN", "x"}, "abcENx", false},
      {"partial match at the end of the stream is flushed", {"END"}, {"abcEN"}, "abcEN", false},
      {"earliest of several stops wins", {"world", "lo"}, {"Hello world"}, "Hel", true},
      {"stop at the very start", {"Hi"}, {"Hi there"}, "", true},
      {"repeated prefix characters", {"aab"}, {"a", "a", "a", "b", "c"}, "a", true},
      {"overlapping candidates", {"abcd", "bce"}, {"ab", "c", "e"}, "a", true},
      {"multi-byte UTF-8 stop",
       {"\xE2\x82\xAC"},
       {"price 5", "\xE2\x82\xAC", " only"},
       "price 5",
       true},
      {"held UTF-8 prefix released on mismatch",
       {"\xC3\xA9t\xC3\xA9"},
       {"caf\xC3\xA9", "!"},
       "caf\xC3\xA9!",
       false},
      {"empty pieces are harmless", {"x"}, {"", "a", "", "x"}, "a", true},
      {"empty stop strings are ignored", {""}, {"abc"}, "abc", false},
  };
  for (const Case& c : cases) RunCase(c);
}

TEST(StopMatcherTest, HoldsBackOnlyPossibleStopPrefixes) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.Push("abc ST").text, "abc ");
  EXPECT_EQ(m.Push("x").text, "STx");
  EXPECT_EQ(m.Push("S").text, "");
  StopMatcher::Result r = m.Push("TOP and more");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
}

TEST(StopMatcherTest, NothingAfterAStop) {
  StopMatcher m({"."});
  EXPECT_TRUE(m.Push("one. two").stopped);
  StopMatcher::Result r = m.Push("three");
  EXPECT_EQ(r.text, "");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(m.Flush(), "");
}

}  // namespace
}  // namespace pdserve::router
