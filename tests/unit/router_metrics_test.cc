// RouterMetrics: what one finished request and final statuses add to the
// exposition.
#include "router/router_metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(RouterMetricsTest, EveryCodeIsExportedFromTheStart) {
  MetricsRegistry registry;
  RouterMetrics metrics(&registry);
  const std::string text = registry.Expose();
  EXPECT_THAT(text, HasSubstr("# TYPE pdserve_router_requests_total counter\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_requests_total{code=\"OK\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_requests_total{code=\"UNAUTHENTICATED\"} 0\n"));
  for (const char* h : {"ttft", "e2e", "kv_transfer", "prefill_compute"}) {
    EXPECT_THAT(text, HasSubstr(std::string("# TYPE pdserve_router_") + h +
                                "_seconds histogram\n"));
  }
}

TEST(RouterMetricsTest, CountsCodes) {
  MetricsRegistry registry;
  RouterMetrics metrics(&registry);
  metrics.CountRequest(grpc::StatusCode::OK);
  metrics.CountRequest(grpc::StatusCode::OK);
  metrics.CountRequest(grpc::StatusCode::RESOURCE_EXHAUSTED);
  metrics.CountRequest(static_cast<grpc::StatusCode>(99));  // counted as UNKNOWN
  const std::string text = registry.Expose();
  EXPECT_THAT(text, HasSubstr("pdserve_router_requests_total{code=\"OK\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_requests_total{code=\"RESOURCE_EXHAUSTED\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_requests_total{code=\"UNKNOWN\"} 1\n"));
}

TEST(RouterMetricsTest, ObservesTimingsInSeconds) {
  MetricsRegistry registry;
  RouterMetrics metrics(&registry);
  v1::Timings remote;
  remote.set_ttft_ms(40);
  remote.set_e2e_ms(900);
  remote.set_kv_transfer_ms(3);
  remote.set_prefill_compute_ms(20);
  remote.set_prefill_mode("remote");
  metrics.ObserveFinished(remote);
  v1::Timings local = remote;
  local.set_prefill_mode("local");
  local.set_ttft_ms(0);  // no token: not observed
  metrics.ObserveFinished(local);
  const std::string text = registry.Expose();
  EXPECT_THAT(text, HasSubstr("pdserve_router_ttft_seconds_bucket{le=\"0.025\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_ttft_seconds_bucket{le=\"0.05\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_ttft_seconds_count 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_ttft_seconds_sum 0.04\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_e2e_seconds_bucket{le=\"1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_e2e_seconds_count 2\n"));
  // KV transfer only for remote prefill; compute for both.
  EXPECT_THAT(text, HasSubstr("pdserve_router_kv_transfer_seconds_count 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_kv_transfer_seconds_bucket{le=\"0.005\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_prefill_compute_seconds_count 2\n"));
  EXPECT_THAT(text, Not(HasSubstr("NaN")));
}

}  // namespace
}  // namespace pdserve
