// Exposition format of the metrics registry (Prometheus text format 0.0.4).
#include "common/metrics/metrics_registry.h"

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

using ::testing::HasSubstr;

TEST(MetricsRegistryTest, CounterAndGaugeWithHelpAndType) {
  MetricsRegistry r;
  r.GetCounter("pdserve_x_total", "Things done.")->Increment(3);
  r.GetGauge("pdserve_y", "A level.")->Set(0.25);
  EXPECT_EQ(r.Expose(),
            "# HELP pdserve_x_total Things done.\n"
            "# TYPE pdserve_x_total counter\n"
            "pdserve_x_total 3\n"
            "# HELP pdserve_y A level.\n"
            "# TYPE pdserve_y gauge\n"
            "pdserve_y 0.25\n");
}

TEST(MetricsRegistryTest, GetReturnsTheSameSeries) {
  MetricsRegistry r;
  Counter* ok = r.GetCounter("req_total", "h", {{"code", "OK"}});
  EXPECT_EQ(ok, r.GetCounter("req_total", "h", {{"code", "OK"}}));
  EXPECT_NE(ok, r.GetCounter("req_total", "h", {{"code", "INTERNAL"}}));
  ok->Increment();
  ok->Increment(-5);  // counters never go down
  EXPECT_EQ(ok->value(), 1);
  // One HELP/TYPE per family, series sorted by labels.
  EXPECT_EQ(r.Expose(),
            "# HELP req_total h\n"
            "# TYPE req_total counter\n"
            "req_total{code=\"INTERNAL\"} 0\n"
            "req_total{code=\"OK\"} 1\n");
}

TEST(MetricsRegistryTest, EscapesLabelValuesAndHelp) {
  MetricsRegistry r;
  r.GetGauge("g", "line1\nback\\slash \"quoted\"", {{"path", "a\\b\"c\"\nd"}})->Set(1);
  EXPECT_EQ(r.Expose(),
            "# HELP g line1\\nback\\\\slash \"quoted\"\n"
            "# TYPE g gauge\n"
            "g{path=\"a\\\\b\\\"c\\\"\\nd\"} 1\n");
}

TEST(MetricsRegistryTest, CallbackGaugeEvaluatedAtScrape) {
  MetricsRegistry r;
  double level = 1;
  r.AddCallbackGauge("cb", "h", [&] { return level; });
  EXPECT_THAT(r.Expose(), HasSubstr("\ncb 1\n"));
  level = 7.5;
  EXPECT_THAT(r.Expose(), HasSubstr("\ncb 7.5\n"));
}

TEST(MetricsRegistryTest, CallbackCounterIsTypedCounterAndReadAtScrape) {
  MetricsRegistry r;
  uint64_t bytes = 0;
  r.AddCallbackCounter("x_bytes_total", "h", [&] { return static_cast<double>(bytes); });
  EXPECT_THAT(r.Expose(), HasSubstr("# TYPE x_bytes_total counter\nx_bytes_total 0\n"));
  bytes = 12288;
  EXPECT_THAT(r.Expose(), HasSubstr("\nx_bytes_total 12288\n"));
}

TEST(MetricsRegistryTest, HistogramBucketsAreCumulativeWithInf) {
  MetricsRegistry r;
  Histogram* h = r.GetHistogram("lat_seconds", "Latency.", {0.1, 1, 10}, {{"tier", "x"}});
  for (double v : {0.05, 0.1, 0.5, 2.0, 100.0}) h->Observe(v);
  EXPECT_EQ(r.Expose(),
            "# HELP lat_seconds Latency.\n"
            "# TYPE lat_seconds histogram\n"
            "lat_seconds_bucket{tier=\"x\",le=\"0.1\"} 2\n"
            "lat_seconds_bucket{tier=\"x\",le=\"1\"} 3\n"
            "lat_seconds_bucket{tier=\"x\",le=\"10\"} 4\n"
            "lat_seconds_bucket{tier=\"x\",le=\"+Inf\"} 5\n"
            "lat_seconds_sum{tier=\"x\"} 102.65\n"
            "lat_seconds_count{tier=\"x\"} 5\n");
}

TEST(MetricsRegistryTest, EmptyHistogramStillHasInfBucket) {
  MetricsRegistry r;
  r.GetHistogram("h", "h", {1});
  EXPECT_EQ(r.Expose(),
            "# HELP h h\n# TYPE h histogram\n"
            "h_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n");
}

TEST(MetricsRegistryTest, FormatsSpecialValues) {
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(1234567), "1234567");
  EXPECT_EQ(FormatMetricValue(-2.5), "-2.5");
}

TEST(MetricsRegistryTest, ConcurrentUpdatesAreNotLost) {
  MetricsRegistry r;
  Counter* c = r.GetCounter("c_total", "h");
  Histogram* h = r.GetHistogram("h", "h", LatencySecondsBuckets());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c->Increment();
        h->Observe(0.01);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c->value(), 40000);
  EXPECT_EQ(h->snapshot().count, 40000u);
}

TEST(MetricsRegistryDeathTest, TypeClashIsAProgrammingError) {
  MetricsRegistry r;
  r.GetCounter("m", "h");
  EXPECT_DEATH(r.GetGauge("m", "h"), "two types");
  EXPECT_DEATH(r.GetGauge("1bad", "h"), "invalid metric name");
  r.AddCallbackCounter("cc", "h", [] { return 1.0; });
  EXPECT_DEATH(r.GetCounter("cc", "h"), "already a callback counter");
}

}  // namespace
}  // namespace pdserve
