// RouterMetrics: the router's request metrics — latency histograms from
// each finished request's Timings (the same numbers the client gets in
// Finished.timings), per-token latencies (TPOT, ITL), KV bytes moved, a
// per-status-code request counter, and the routing decisions: which policy
// picked a worker for which tier, and where each request was prefilled and
// why (conditional disaggregation, routing_policy.h PlaceRequest).
//
// Thread-safe; the series are created up front so Observe/Count never take
// the registry's lock, and every code, policy and prefill reason shows up
// (at 0) from the first scrape.
#ifndef PDSERVE_ROUTER_CALL_ROUTER_METRICS_H_
#define PDSERVE_ROUTER_CALL_ROUTER_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "absl/types/span.h"
#include "common/metrics/metrics_registry.h"
#include "grpcpp/grpcpp.h"
#include "pdserve/v1/common.pb.h"
#include "router/call/structured_output_metrics.h"
#include "router/config/router_options.h"

namespace pdserve::router {

// The door a request came in by: the gRPC API or the OpenAI HTTP API
// (router/openai). Request counts, TTFT, end-to-end latency and output
// tokens carry it as the `api` label.
enum class Api { kGrpc, kOpenAi };
const char* ApiName(Api api);

// The tier a routing decision picked a worker for.
enum class RoutingTier { kDecode, kPrefill };

class RouterMetrics {
 public:
  // `registry` must outlive this object.
  explicit RouterMetrics(MetricsRegistry* registry);

  // A request that ended with Finished (status OK). `completion_tokens`
  // gives TPOT ((e2e - ttft) / (tokens - 1)); `inter_token_seconds` holds
  // one inter-token latency per token event after the first
  // (RequestTimeline::inter_token_seconds).
  void ObserveFinished(const v1::Timings& timings, int32_t completion_tokens = 0,
                       absl::Span<const double> inter_token_seconds = {}, Api api = Api::kGrpc);
  // Every Generate request's final status, admission refusals included.
  void CountRequest(grpc::StatusCode code, Api api = Api::kGrpc);
  // A worker of `tier` was chosen by `policy`.
  void CountRouting(RoutingTier tier, PolicyKind policy);
  // Where a placed request is prefilled, and Placement::reason.
  void CountPrefillDecision(bool local, const std::string& reason);
  // A decode worker offered a stream for migration: it moved with its KV,
  // or the move failed and the stream was recomputed elsewhere.
  void CountMigration(bool moved);
  // Back pressure: streams whose decode reads are paused for a client that
  // does not read, and the bytes queued for clients (deltas).
  void AddPausedStreams(int delta) { paused_streams_->Add(delta); }
  void AddClientBufferedBytes(int64_t delta) {
    client_buffered_bytes_->Add(static_cast<double>(delta));
  }
  // Admitted requests that have streamed no token yet (waiting: placement,
  // prefill, KV transfer, decode admission) and those streaming (running),
  // as deltas; and the share of KV blocks in use across the usable decode
  // workers of this router's model. The load signals a Gateway's endpoint
  // picker or an autoscaler reads (GAIE's queue / running / KV-utilisation
  // metrics; docs/OBSERVABILITY.md).
  void AddRequests(int waiting_delta, int running_delta) {
    requests_waiting_->Add(waiting_delta);
    requests_running_->Add(running_delta);
  }
  void SetDecodeKvUtilization(double share) { decode_kv_utilization_->Set(share); }
  // Structured output and tool calling at admission.
  StructuredOutputMetrics& structured() { return structured_; }

 private:
  static constexpr int kNumCodes = grpc::StatusCode::UNAUTHENTICATED + 1;
  static constexpr int kNumPolicies = 3;
  static constexpr int kNumApis = 2;

  MetricsRegistry* const registry_;
  StructuredOutputMetrics structured_;
  Gauge* paused_streams_;
  Gauge* client_buffered_bytes_;
  Gauge* requests_waiting_;
  Gauge* requests_running_;
  Gauge* decode_kv_utilization_;
  std::array<Histogram*, kNumApis> ttft_;
  Histogram* tpot_;
  Histogram* itl_;
  std::array<Histogram*, kNumApis> e2e_;
  Histogram* router_queue_;
  Histogram* prefill_queue_;
  Histogram* decode_admission_;
  Histogram* kv_transfer_;
  Histogram* kv_transfer_bytes_;
  Histogram* prefill_compute_;
  std::array<Counter*, kNumApis> completion_tokens_;
  std::array<std::array<Counter*, kNumCodes>, kNumApis> requests_;
  std::array<std::array<Counter*, kNumPolicies>, 2> routing_;
  std::array<Counter*, 2> migrations_;  // [moved]
  Counter* PrefillDecisionCounter(bool local, const std::string& reason);

  // Keyed by "where/reason", for the reasons PlaceRequest gives.
  std::map<std::string, Counter*> prefill_decisions_;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_ROUTER_METRICS_H_
