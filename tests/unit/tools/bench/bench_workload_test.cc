#include "tools/bench/bench_workload.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pdserve {
namespace {

constexpr int kVocab = 49152;

WorkloadOptions Options() {
  WorkloadOptions o;
  o.vocab_size = kVocab;
  o.seed = 7;
  return o;
}

TEST(ParseLengthRangeTest, FixedAndRange) {
  absl::StatusOr<LengthRange> fixed = ParseLengthRange("128");
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->min, 128);
  EXPECT_EQ(fixed->max, 128);
  absl::StatusOr<LengthRange> range = ParseLengthRange("64:512");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->min, 64);
  EXPECT_EQ(range->max, 512);
}

TEST(ParseLengthRangeTest, RejectsMalformed) {
  for (const char* bad : {"", "0", "-4", "5:3", "abc", "1:2:3", "64:", ":64", "1.5"}) {
    EXPECT_EQ(ParseLengthRange(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ParseLengthFileTest, PairsCommentsAndBlanks) {
  absl::StatusOr<std::vector<LengthPair>> p = ParseLengthFile("# in out\n100 20\n\n  7\t3 \n");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[0].input, 100);
  EXPECT_EQ((*p)[0].output, 20);
  EXPECT_EQ((*p)[1].input, 7);
  EXPECT_EQ((*p)[1].output, 3);
}

TEST(ParseLengthFileTest, ReportsTheBadLine) {
  absl::Status s = ParseLengthFile("10 10\n10\n").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("line 2"), absl::string_view::npos) << s;
  EXPECT_FALSE(ParseLengthFile("10 0\n").ok());
  EXPECT_FALSE(ParseLengthFile("# only a comment\n").ok());
}

TEST(WorkloadTest, DeterministicPerIndex) {
  WorkloadOptions o = Options();
  o.input = {16, 300};
  o.output = {1, 64};
  absl::StatusOr<Workload> w = Workload::Create(o);
  ASSERT_TRUE(w.ok());
  const RequestShape a = w->Make(5), b = w->Make(5), c = w->Make(6);
  EXPECT_EQ(a.prompt, b.prompt);
  EXPECT_EQ(a.max_tokens, b.max_tokens);
  EXPECT_NE(a.prompt, c.prompt);
  o.seed = 8;
  EXPECT_NE(Workload::Create(o)->Make(5).prompt, a.prompt);
}

TEST(WorkloadTest, LengthsAndIdsInRange) {
  WorkloadOptions o = Options();
  o.input = {64, 256};
  o.output = {32, 32};
  absl::StatusOr<Workload> w = Workload::Create(o);
  ASSERT_TRUE(w.ok());
  for (int i = 0; i < 200; ++i) {
    const RequestShape r = w->Make(i);
    EXPECT_GE(r.prompt.size(), 64u);
    EXPECT_LE(r.prompt.size(), 256u);
    EXPECT_EQ(r.max_tokens, 32);
    for (int32_t id : r.prompt) {
      ASSERT_GE(id, 100);
      ASSERT_LT(id, kVocab - 100);
    }
  }
}

TEST(WorkloadTest, FixedLengthIsExact) {
  WorkloadOptions o = Options();
  o.input = {128, 128};
  EXPECT_EQ(Workload::Create(o)->Make(3).prompt.size(), 128u);
}

TEST(WorkloadTest, LongFractionMixesInLongPrompts) {
  WorkloadOptions o = Options();
  o.input = {32, 64};
  o.long_fraction = 0.2;
  o.long_input = {480, 520};
  absl::StatusOr<Workload> w = Workload::Create(o);
  ASSERT_TRUE(w.ok());
  int long_count = 0;
  for (int i = 0; i < 2000; ++i) {
    const RequestShape r = w->Make(i);
    if (!r.long_prompt) {
      EXPECT_LE(r.prompt.size(), 64u);
      continue;
    }
    ++long_count;
    EXPECT_GE(r.prompt.size(), 480u);
    EXPECT_LE(r.prompt.size(), 520u);
  }
  EXPECT_NEAR(long_count, 400, 60);
}

TEST(WorkloadTest, LengthTableIsUsedInTurn) {
  WorkloadOptions o = Options();
  o.length_table = {{10, 1}, {20, 2}, {30, 3}};
  absl::StatusOr<Workload> w = Workload::Create(o);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->Make(0).prompt.size(), 10u);
  EXPECT_EQ(w->Make(4).prompt.size(), 20u);
  EXPECT_EQ(w->Make(4).max_tokens, 2);
  EXPECT_EQ(w->MaxRequestTokens(), 33);
}

TEST(WorkloadTest, MaxRequestTokensCoversLongPrompts) {
  WorkloadOptions o = Options();
  o.input = {10, 100};
  o.output = {5, 50};
  EXPECT_EQ(Workload::Create(o)->MaxRequestTokens(), 150);
  o.long_fraction = 0.1;
  o.long_input = {500, 600};
  EXPECT_EQ(Workload::Create(o)->MaxRequestTokens(), 650);
}

TEST(WorkloadTest, RejectsBadOptions) {
  WorkloadOptions o = Options();
  o.vocab_size = 150;
  EXPECT_FALSE(Workload::Create(o).ok());
  o = Options();
  o.long_fraction = 1.5;
  EXPECT_FALSE(Workload::Create(o).ok());
  o = Options();
  o.input = {0, 10};
  EXPECT_FALSE(Workload::Create(o).ok());
}

// Mean and coefficient of variation of n gaps.
std::pair<double, double> GapStats(double rate, double burstiness, int n) {
  ArrivalProcess p(rate, burstiness, 1);
  double sum = 0, sq = 0;
  for (int i = 0; i < n; ++i) {
    const double g = p.NextGapS();
    sum += g;
    sq += g * g;
  }
  const double mean = sum / n;
  return {mean, std::sqrt(sq / n - mean * mean) / mean};
}

TEST(ArrivalProcessTest, PoissonHasTheRateAndUnitVariation) {
  const auto [mean, cv] = GapStats(4.0, 1.0, 40000);
  EXPECT_NEAR(mean, 0.25, 0.01);
  EXPECT_NEAR(cv, 1.0, 0.05);
}

TEST(ArrivalProcessTest, BurstinessSetsVariationNotRate) {
  // Gamma(shape k): CV = 1 / sqrt(k).
  const auto [mean, cv] = GapStats(4.0, 0.25, 40000);
  EXPECT_NEAR(mean, 0.25, 0.02);
  EXPECT_NEAR(cv, 2.0, 0.15);
  const auto [mean4, cv4] = GapStats(4.0, 4.0, 40000);
  EXPECT_NEAR(mean4, 0.25, 0.01);
  EXPECT_NEAR(cv4, 0.5, 0.03);
}

TEST(ArrivalProcessTest, SameSeedSameArrivals) {
  ArrivalProcess a(2.0, 0.5, 9), b(2.0, 0.5, 9);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.NextGapS(), b.NextGapS());
}

}  // namespace
}  // namespace pdserve

namespace pdserve {
namespace {

TEST(WorkloadTest, SharedPrefixesRepeatPerGroupAndDifferAcrossGroups) {
  WorkloadOptions w;
  w.input = {8, 8};
  w.output = {4, 4};
  w.vocab_size = 1000;
  w.shared_prefixes = 3;
  w.shared_prefix_len = 20;
  absl::StatusOr<Workload> wl = Workload::Create(w);
  ASSERT_TRUE(wl.ok()) << wl.status();
  auto prefix = [&](int64_t i) {
    const std::vector<int32_t> p = wl->Make(i).prompt;
    EXPECT_EQ(p.size(), 28u);
    return std::vector<int32_t>(p.begin(), p.begin() + 20);
  };
  EXPECT_EQ(prefix(0), prefix(3));
  EXPECT_EQ(prefix(1), prefix(7));
  EXPECT_NE(prefix(0), prefix(1));
  EXPECT_NE(prefix(1), prefix(2));
  // The request's own part still differs within a group.
  EXPECT_NE(wl->Make(0).prompt, wl->Make(3).prompt);
  EXPECT_EQ(wl->MaxRequestTokens(), 28 + 4);
}

}  // namespace
}  // namespace pdserve

namespace pdserve {
namespace {

constexpr ConversationKind kKinds[] = {ConversationKind::kCodeEdit, ConversationKind::kSummary,
                                       ConversationKind::kChat, ConversationKind::kNoCopy};

bool SameMessages(const std::vector<ChatMessage>& a, const std::vector<ChatMessage>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].role != b[i].role || a[i].content != b[i].content) return false;
  }
  return true;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ConversationTest, NamesRoundTripAndUnknownNamesAreRefused) {
  for (ConversationKind kind : kKinds) {
    absl::StatusOr<ConversationKind> parsed = ParseConversationKind(ConversationKindName(kind));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, kind);
  }
  absl::StatusOr<ConversationKind> bad = ParseConversationKind("code_edit");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("code-edit"), std::string::npos) << bad.status();
}

TEST(ConversationTest, AFunctionOfSeedAndIndexThatVaries) {
  for (ConversationKind kind : kKinds) {
    SCOPED_TRACE(ConversationKindName(kind));
    const std::vector<ChatMessage> first = MakeConversation(kind, 7, 3);
    EXPECT_TRUE(SameMessages(first, MakeConversation(kind, 7, 3)));
    ASSERT_FALSE(first.empty());
    EXPECT_EQ(first.back().role, "user");
    // Different requests differ (names, numbers, order), so a prefix
    // cache cannot serve one from another beyond the instructions.
    int differing = 0;
    for (int64_t i = 0; i < 16; ++i) {
      differing += !SameMessages(first, MakeConversation(kind, 7, 100 + i));
    }
    EXPECT_GE(differing, 14);
    EXPECT_FALSE(SameMessages(first, MakeConversation(kind, 8, 3)));
  }
}

TEST(ConversationTest, CodeEditRenamesAParameterOfTwentyFourFunctions) {
  for (int64_t i = 0; i < 8; ++i) {
    const std::vector<ChatMessage> m = MakeConversation(ConversationKind::kCodeEdit, 1, i);
    ASSERT_EQ(m.size(), 1u);
    const std::string& text = m[0].content;
    EXPECT_EQ(Count(text, "\ndef "), 24) << text;
    // "renaming the parameter `old` to `new`": old is every function's
    // first parameter, new appears only in the instruction.
    const size_t from = text.find('`') + 1;
    const std::string old_name = text.substr(from, text.find('`', from) - from);
    const size_t to = text.find('`', text.find("to `", from)) + 1;
    const std::string new_name = text.substr(to, text.find('`', to) - to);
    EXPECT_GE(Count(text, "(" + old_name + ", "), 24) << text;
    EXPECT_EQ(Count(text, new_name), 1) << text;
  }
}

TEST(ConversationTest, ChatIsRealTurnsEndingInARequestToRepeat) {
  const std::vector<ChatMessage> m = MakeConversation(ConversationKind::kChat, 1, 0);
  ASSERT_EQ(m.size(), 5u);
  const char* roles[] = {"user", "assistant", "user", "assistant", "user"};
  for (size_t i = 0; i < m.size(); ++i) EXPECT_EQ(m[i].role, roles[i]);
  EXPECT_NE(m[1].content.find("6. "), std::string::npos) << m[1].content;
  EXPECT_NE(m[4].content.find("Repeat your first answer"), std::string::npos);
}

TEST(ConversationTest, SummaryQuotesAShuffledPassage) {
  const std::string a = MakeConversation(ConversationKind::kSummary, 1, 0)[0].content;
  EXPECT_NE(a.find("word for word"), std::string::npos);
  EXPECT_GE(Count(a, ". "), 9) << a;  // the passage's ten sentences
}

TEST(WorkloadTest, ConversationRequestsCarryMessagesNotIds) {
  WorkloadOptions o = Options();
  o.conversation = ConversationKind::kChat;
  o.output = {300, 600};
  absl::StatusOr<Workload> w = Workload::Create(o);
  ASSERT_TRUE(w.ok()) << w.status();
  for (int64_t i = 0; i < 20; ++i) {
    const RequestShape r = w->Make(i);
    EXPECT_TRUE(r.prompt.empty());
    EXPECT_TRUE(SameMessages(r.messages, MakeConversation(ConversationKind::kChat, 7, i)));
    EXPECT_GE(r.max_tokens, 300);
    EXPECT_LE(r.max_tokens, 600);
  }
  EXPECT_EQ(w->MaxRequestTokens(), 600);
}

}  // namespace
}  // namespace pdserve
