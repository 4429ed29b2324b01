#include "router/router_metrics.h"

#include "router/worker_failure.h"

namespace pdserve {

RouterMetrics::RouterMetrics(MetricsRegistry* registry) {
  const std::vector<double> buckets = LatencySecondsBuckets();
  ttft_ = registry->GetHistogram("pdserve_router_ttft_seconds",
                                 "Admission to first token, as the router sees it.", buckets);
  e2e_ = registry->GetHistogram("pdserve_router_e2e_seconds",
                                "Admission to Finished, for requests that finished OK.", buckets);
  kv_transfer_ = registry->GetHistogram(
      "pdserve_router_kv_transfer_seconds",
      "Prefill worker's last layer computed until the decode worker acked the KV (remote "
      "prefill only).",
      buckets);
  prefill_compute_ = registry->GetHistogram(
      "pdserve_router_prefill_compute_seconds",
      "Forward pass of the prompt, as reported by the worker that ran it.", buckets);
  for (int code = 0; code < kNumCodes; ++code) {
    requests_[code] = registry->GetCounter(
        "pdserve_router_requests_total", "Generate requests by final gRPC status code.",
        {{"code", StatusCodeName(static_cast<grpc::StatusCode>(code))}});
  }
}

void RouterMetrics::ObserveFinished(const v1::Timings& t) {
  // A 0 means "not measured" (no token produced, or a worker that leaves
  // the field unset); counting it would drag the low buckets.
  if (t.ttft_ms() > 0) ttft_->Observe(t.ttft_ms() / 1e3);
  e2e_->Observe(t.e2e_ms() / 1e3);
  if (t.prefill_mode() == "remote" && t.kv_transfer_ms() > 0) {
    kv_transfer_->Observe(t.kv_transfer_ms() / 1e3);
  }
  if (t.prefill_compute_ms() > 0) prefill_compute_->Observe(t.prefill_compute_ms() / 1e3);
}

void RouterMetrics::CountRequest(grpc::StatusCode code) {
  const int i = static_cast<int>(code);
  requests_[(i >= 0 && i < kNumCodes) ? i : grpc::StatusCode::UNKNOWN]->Increment();
}

}  // namespace pdserve
