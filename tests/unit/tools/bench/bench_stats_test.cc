#include "tools/bench/bench_stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pdserve {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;

// A successful request whose chunks arrive at the given (ms, tokens).
RequestRecord Req(std::vector<ChunkArrival> chunks, double e2e_ms) {
  RequestRecord r;
  r.chunks = std::move(chunks);
  r.e2e_ms = e2e_ms;
  r.input_tokens = 10;
  return r;
}

TEST(PercentileTest, InterpolatesLikeNumpy) {
  const std::vector<double> v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  // numpy.percentile(range(1, 11), [0, 50, 90, 99, 100])
  EXPECT_DOUBLE_EQ(Percentile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.5), 5.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.9), 9.1);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.99), 9.91);
  EXPECT_DOUBLE_EQ(Percentile(v, 1.0), 10.0);
}

TEST(PercentileTest, SingleValue) {
  EXPECT_DOUBLE_EQ(Percentile({7}, 0.5), 7);
  EXPECT_DOUBLE_EQ(Percentile({7}, 0.99), 7);
}

TEST(SummarizeTest, SortsAndSummarizes) {
  const Distribution d = Summarize({10, 1, 4, 3, 2});
  EXPECT_EQ(d.count, 5u);
  EXPECT_DOUBLE_EQ(d.mean, 4);
  EXPECT_DOUBLE_EQ(d.p50, 3);
  EXPECT_DOUBLE_EQ(d.p90, 7.6);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.max, 10);
}

TEST(SummarizeTest, EmptyIsAllZero) {
  const Distribution d = Summarize({});
  EXPECT_EQ(d.count, 0u);
  EXPECT_EQ(d.mean, 0);
  EXPECT_EQ(d.p99, 0);
}

TEST(RequestMetricsTest, TtftAndTpot) {
  const RequestRecord r = Req({{100, 1}, {120, 1}, {140, 1}, {160, 1}}, 170);
  EXPECT_EQ(OutputTokens(r), 4);
  EXPECT_DOUBLE_EQ(*Ttft(r), 100);
  // (E2E - TTFT) / (tokens - 1): the stream's tail after the last token
  // counts, as in the field's definition.
  EXPECT_DOUBLE_EQ(*Tpot(r), 70.0 / 3);
}

TEST(RequestMetricsTest, TpotUndefinedForOneToken) {
  EXPECT_FALSE(Tpot(Req({{50, 1}}, 60)).has_value());
  EXPECT_FALSE(Ttft(Req({}, 60)).has_value());
  EXPECT_FALSE(Tpot(Req({}, 60)).has_value());
}

TEST(ItlTest, EveryGapBetweenSingleTokenChunks) {
  std::vector<double> itl;
  AppendItls(Req({{100, 1}, {120, 1}, {150, 1}}, 150), &itl);
  EXPECT_THAT(itl, ElementsAre(20, 30));
}

TEST(ItlTest, MultiTokenChunkSplitsItsGapEvenly) {
  std::vector<double> itl;
  AppendItls(Req({{100, 1}, {120, 1}, {160, 2}, {170, 1}}, 170), &itl);
  EXPECT_THAT(itl, ElementsAre(20, 20, 20, 10));
}

TEST(ItlTest, TokensOfTheFirstChunkAddNoGap) {
  std::vector<double> itl;
  AppendItls(Req({{100, 3}, {130, 1}}, 130), &itl);
  EXPECT_THAT(itl, ElementsAre(30));
}

TEST(ItlTest, TextOnlyChunkIsNotATokenArrival) {
  std::vector<double> itl;
  AppendItls(Req({{100, 1}, {110, 0}, {130, 1}}, 130), &itl);
  EXPECT_THAT(itl, ElementsAre(30));
}

TEST(ItlTest, PoolsAcrossRequests) {
  std::vector<double> itl;
  AppendItls(Req({{10, 1}, {15, 1}}, 15), &itl);
  AppendItls(Req({{50, 1}, {90, 1}}, 90), &itl);
  EXPECT_THAT(itl, ElementsAre(5, 40));
}

struct SloCase {
  const char* name;
  RequestRecord record;
  Slo slo;
  bool meets;
};

RequestRecord Failed() {
  RequestRecord r = Req({{10, 1}, {20, 1}}, 20);
  r.code = absl::StatusCode::kUnavailable;
  return r;
}

TEST(MeetsSloTest, Table) {
  const RequestRecord fast = Req({{100, 1}, {110, 1}, {120, 1}}, 120);  // TPOT 10
  const std::vector<SloCase> cases = {
      {"no slo", fast, {}, true},
      {"failed never meets", Failed(), {}, false},
      {"ttft at the limit", fast, {100.0, std::nullopt}, true},
      {"ttft over", fast, {99.0, std::nullopt}, false},
      {"tpot at the limit", fast, {std::nullopt, 10.0}, true},
      {"tpot over", fast, {std::nullopt, 9.0}, false},
      {"both met", fast, {200.0, 20.0}, true},
      {"one token has no tpot", Req({{100, 1}}, 500), {std::nullopt, 1.0}, true},
      {"no output misses ttft", Req({}, 50), {1000.0, std::nullopt}, false},
  };
  for (const SloCase& c : cases) {
    EXPECT_EQ(MeetsSlo(c.record, c.slo), c.meets) << c.name;
  }
}

TEST(SummarizeRunTest, CountsThroughputGoodputAndErrors) {
  RequestRecord a = Req({{100, 1}, {110, 1}, {120, 1}}, 120);  // TPOT 10
  RequestRecord b = Req({{300, 1}, {350, 1}}, 400);            // TPOT 100
  RequestRecord c = Failed();
  c.error = "worker gone";
  PhaseTimings t;
  t.prefill_compute_ms = 40;
  t.kv_transfer_bytes = 1000;
  t.remote_prefill = true;
  a.timings = t;
  t.prefill_compute_ms = 60;
  t.remote_prefill = false;
  b.timings = t;
  const BenchSummary s = SummarizeRun({a, b, c}, 2.0, Slo{std::nullopt, 50.0});
  EXPECT_EQ(s.completed, 2u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(s.errors.at("UNAVAILABLE"), 1u);
  EXPECT_EQ(s.error_example.at("UNAVAILABLE"), "worker gone");
  EXPECT_EQ(s.input_tokens, 20);
  EXPECT_EQ(s.output_tokens, 5);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(s.output_throughput, 2.5);
  EXPECT_DOUBLE_EQ(s.total_token_throughput, 12.5);
  EXPECT_EQ(s.good_requests, 1u);
  EXPECT_DOUBLE_EQ(s.goodput, 0.5);
  EXPECT_EQ(s.ttft_ms.count, 2u);
  EXPECT_DOUBLE_EQ(s.ttft_ms.mean, 200);
  EXPECT_DOUBLE_EQ(s.tpot_ms.mean, 55);
  EXPECT_EQ(s.itl_ms.count, 3u);  // 10, 10, 50
  EXPECT_THAT(s.itl_ms.mean, DoubleNear(70.0 / 3, 1e-9));
  EXPECT_DOUBLE_EQ(s.e2e_ms.mean, 260);
  EXPECT_EQ(s.phases.count, 2u);
  EXPECT_EQ(s.phases.remote_prefill, 1u);
  EXPECT_DOUBLE_EQ(s.phases.mean.prefill_compute_ms, 50);
  EXPECT_DOUBLE_EQ(s.phases.mean.kv_transfer_bytes, 1000);
}

TEST(SummarizeRunTest, EmptyRunHasNoRates) {
  const BenchSummary s = SummarizeRun({}, 0, Slo{});
  EXPECT_EQ(s.completed, 0u);
  EXPECT_EQ(s.request_throughput, 0);
  EXPECT_EQ(s.goodput, 0);
}

}  // namespace
}  // namespace pdserve
