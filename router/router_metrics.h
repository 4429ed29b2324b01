// RouterMetrics: the router's request metrics — latency histograms from
// each finished request's Timings (the same numbers the client gets in
// Finished.timings) and a per-status-code request counter.
//
// Thread-safe; the series are created up front so Observe/Count never take
// the registry's lock, and every code shows up (at 0) from the first scrape.
#ifndef PDSERVE_ROUTER_ROUTER_METRICS_H_
#define PDSERVE_ROUTER_ROUTER_METRICS_H_

#include <array>

#include "common/metrics/metrics_registry.h"
#include "grpcpp/grpcpp.h"
#include "pdserve/v1/common.pb.h"

namespace pdserve {

class RouterMetrics {
 public:
  // `registry` must outlive this object.
  explicit RouterMetrics(MetricsRegistry* registry);

  // A request that ended with Finished (status OK).
  void ObserveFinished(const v1::Timings& timings);
  // Every Generate request's final status, admission refusals included.
  void CountRequest(grpc::StatusCode code);

 private:
  static constexpr int kNumCodes = grpc::StatusCode::UNAUTHENTICATED + 1;

  Histogram* ttft_;
  Histogram* e2e_;
  Histogram* kv_transfer_;
  Histogram* prefill_compute_;
  std::array<Counter*, kNumCodes> requests_;
};

}  // namespace pdserve

#endif  // PDSERVE_ROUTER_ROUTER_METRICS_H_
