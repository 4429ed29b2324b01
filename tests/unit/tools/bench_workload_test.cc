#include "tools/bench_workload.h"

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
