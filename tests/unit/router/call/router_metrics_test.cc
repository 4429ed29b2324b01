// RouterMetrics: what one finished request and final statuses add to the
// exposition.
#include "router/call/router_metrics.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdserve::router {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(RouterMetricsTest, EveryCodeIsExportedFromTheStart) {
  MetricsRegistry registry;
  RouterMetrics metrics(&registry);
  const std::string text = registry.Expose();
  EXPECT_THAT(text, HasSubstr("# TYPE pdserve_router_requests_total counter\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_requests_total{api=\"grpc\",code=\"OK\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_requests_total{api=\"grpc\",code=\"UNAUTHENTICATED\"} 0\n"));
  for (const char* h : {"ttft", "tpot", "itl", "e2e", "queue", "prefill_queue", "decode_admission",
                        "kv_transfer", "prefill_compute"}) {
    EXPECT_THAT(text,
                HasSubstr(std::string("# TYPE pdserve_router_") + h + "_seconds histogram\n"));
  }
  EXPECT_THAT(text, HasSubstr("# TYPE pdserve_router_kv_transfer_bytes histogram\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_routing_decisions_total{tier=\"decode\","
                              "policy=\"prefix_aware\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_routing_decisions_total{tier=\"prefill\","
                              "policy=\"round_robin\"} 0\n"));
  for (const char* series :
       {"where=\"local\",reason=\"forced\"", "where=\"local\",reason=\"prefill_fallback\"",
        "where=\"local\",reason=\"short_uncached_prompt\"",
        "where=\"local\",reason=\"no_prefill_worker\"",
        "where=\"local\",reason=\"prefill_saturated\"",
        "where=\"remote\",reason=\"prefill_worker_available\""}) {
    EXPECT_THAT(
        text, HasSubstr(std::string("pdserve_router_prefill_decisions_total{") + series + "} 0\n"));
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
  EXPECT_THAT(text, HasSubstr("pdserve_router_requests_total{api=\"grpc\",code=\"OK\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_requests_total{api=\"grpc\",code=\"RESOURCE_EXHAUSTED\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_requests_total{api=\"grpc\",code=\"UNKNOWN\"} 1\n"));
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
  EXPECT_THAT(text, HasSubstr("pdserve_router_ttft_seconds_bucket{api=\"grpc\",le=\"0.025\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_ttft_seconds_bucket{api=\"grpc\",le=\"0.05\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_ttft_seconds_count{api=\"grpc\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_ttft_seconds_sum{api=\"grpc\"} 0.04\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_e2e_seconds_bucket{api=\"grpc\",le=\"1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_e2e_seconds_count{api=\"grpc\"} 2\n"));
  // KV transfer only for remote prefill; compute for both.
  EXPECT_THAT(text, HasSubstr("pdserve_router_kv_transfer_seconds_count 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_kv_transfer_seconds_bucket{le=\"0.005\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_prefill_compute_seconds_count 2\n"));
  EXPECT_THAT(text, Not(HasSubstr("NaN")));
}

TEST(RouterMetricsTest, ObservesPerTokenLatenciesAndPhases) {
  MetricsRegistry registry;
  RouterMetrics metrics(&registry);
  v1::Timings t;
  t.set_ttft_ms(100);
  t.set_e2e_ms(500);  // 400 ms for 4 more tokens: TPOT 0.1 s
  t.set_router_queue_ms(2);
  t.set_decode_admission_ms(3);
  t.set_prefill_queue_ms(30);
  t.set_kv_transfer_bytes(100000);
  t.set_prefill_mode("remote");
  const std::vector<double> itl = {0.004, 0.03, 0.2};
  metrics.ObserveFinished(t, 5, itl);
  v1::Timings local = t;
  local.set_prefill_mode("local");
  metrics.ObserveFinished(local, 1, {});  // one token: no TPOT
  const std::string text = registry.Expose();
  EXPECT_THAT(text, HasSubstr("pdserve_router_completion_tokens_total{api=\"grpc\"} 6\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_tpot_seconds_count 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_tpot_seconds_sum 0.1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_tpot_seconds_bucket{le=\"0.075\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_tpot_seconds_bucket{le=\"0.1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_itl_seconds_count 3\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_itl_seconds_bucket{le=\"0.005\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_itl_seconds_bucket{le=\"0.05\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_queue_seconds_count 2\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_decode_admission_seconds_count 2\n"));
  // Prefill queue and KV bytes only for remote prefill.
  EXPECT_THAT(text, HasSubstr("pdserve_router_prefill_queue_seconds_count 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_kv_transfer_bytes_count 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_kv_transfer_bytes_sum 1e+05\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_kv_transfer_bytes_bucket{le=\"65536\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_kv_transfer_bytes_bucket{le=\"262144\"} 1\n"));
}

TEST(RouterMetricsTest, CountsRoutingAndPrefillDecisions) {
  MetricsRegistry registry;
  RouterMetrics metrics(&registry);
  metrics.CountRouting(RoutingTier::kDecode, PolicyKind::kPrefixAware);
  metrics.CountRouting(RoutingTier::kDecode, PolicyKind::kPrefixAware);
  metrics.CountRouting(RoutingTier::kPrefill, PolicyKind::kLeastLoaded);
  metrics.CountPrefillDecision(true, "short_uncached_prompt");
  metrics.CountPrefillDecision(false, "prefill_worker_available");
  metrics.CountPrefillDecision(false, "prefill_worker_available");
  metrics.CountPrefillDecision(true, "something_new");  // still counted
  const std::string text = registry.Expose();
  EXPECT_THAT(text, HasSubstr("pdserve_router_routing_decisions_total{tier=\"decode\","
                              "policy=\"prefix_aware\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_routing_decisions_total{tier=\"prefill\","
                              "policy=\"least_loaded\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_routing_decisions_total{tier=\"decode\","
                              "policy=\"least_loaded\"} 0\n"));
  EXPECT_THAT(text,
              HasSubstr("pdserve_router_prefill_decisions_total{where=\"local\",reason=\"short_"
                        "uncached_prompt\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("pdserve_router_prefill_decisions_total{where=\"remote\",reason=\"prefill_"
                        "worker_available\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("pdserve_router_prefill_decisions_total{where=\"local\","
                              "reason=\"something_new\"} 1\n"));
}

}  // namespace
}  // namespace pdserve::router
