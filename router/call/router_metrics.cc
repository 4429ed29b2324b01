#include "router/call/router_metrics.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "router/call/worker_failure.h"

namespace pdserve::router {
namespace {

// Per-token latencies are tens of milliseconds on a GPU, up to seconds on
// a loaded CPU: 1 ms .. 2.5 s.
std::vector<double> TokenSecondsBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5};
}

// KV of one prompt: 4 KiB (a block of a tiny model) .. 4 GiB, powers of 4.
std::vector<double> KvBytesBuckets() {
  std::vector<double> b;
  for (double v = 4096; v <= 4.5e9; v *= 4) b.push_back(v);
  return b;
}

constexpr Api kApis[] = {Api::kGrpc, Api::kOpenAi};

constexpr PolicyKind kPolicies[] = {PolicyKind::kLeastLoaded, PolicyKind::kRoundRobin,
                                    PolicyKind::kPrefixAware};

// Placement::reason values (routing_policy.h), by where they prefill.
constexpr const char* kLocalReasons[] = {"forced",
                                         "prefill_fallback",
                                         "short_uncached_prompt",
                                         "no_prefill_worker",
                                         "prefill_saturated",
                                         "no_compatible_prefill_worker"};
constexpr const char* kRemoteReasons[] = {"prefill_worker_available"};

constexpr char kPrefillDecisions[] = "pdserve_router_prefill_decisions_total";
constexpr char kPrefillDecisionsHelp[] =
    "Placed requests by where their prompt is prefilled (remote: a prefill worker; local: the "
    "decode worker) and why.";

}  // namespace

const char* ApiName(Api api) { return api == Api::kOpenAi ? "openai" : "grpc"; }

RouterMetrics::RouterMetrics(MetricsRegistry* registry)
    : registry_(registry), structured_(registry) {
  const std::vector<double> buckets = LatencySecondsBuckets();
  for (Api api : kApis) {
    const MetricLabels label = {{"api", ApiName(api)}};
    const int a = static_cast<int>(api);
    ttft_[a] =
        registry->GetHistogram("pdserve_router_ttft_seconds",
                               "Admission to first token, as the router sees it.", buckets, label);
    e2e_[a] = registry->GetHistogram("pdserve_router_e2e_seconds",
                                     "Admission to Finished, for requests that finished OK.",
                                     buckets, label);
    completion_tokens_[a] = registry->GetCounter(
        "pdserve_router_completion_tokens_total",
        "Tokens generated for requests that finished OK (output throughput).", label);
    for (int code = 0; code < kNumCodes; ++code) {
      requests_[a][code] = registry->GetCounter(
          "pdserve_router_requests_total", "Generate requests by API and final gRPC status code.",
          {{"api", ApiName(api)}, {"code", StatusCodeName(static_cast<grpc::StatusCode>(code))}});
    }
  }
  paused_streams_ = registry->GetGauge(
      "pdserve_router_paused_streams",
      "Streams whose reads from the decode worker are paused because their client does not "
      "read (back pressure).");
  client_buffered_bytes_ = registry->GetGauge(
      "pdserve_router_client_buffered_bytes",
      "Bytes of responses the router holds for clients that have not taken them yet.");
  requests_waiting_ = registry->GetGauge(
      "pdserve_router_requests_waiting",
      "Admitted requests that have not streamed a token yet (placement, prefill, KV transfer, "
      "decode admission).");
  requests_running_ = registry->GetGauge("pdserve_router_requests_running",
                                         "Requests streaming tokens to their clients.");
  decode_kv_utilization_ = registry->GetGauge(
      "pdserve_router_decode_kv_utilization",
      "KV blocks in use over KV blocks in all, across the usable decode workers of this "
      "router's model (0-1).");
  tpot_ = registry->GetHistogram(
      "pdserve_router_tpot_seconds",
      "Time per output token after the first, per request: (e2e - ttft) / (tokens - 1).",
      TokenSecondsBuckets());
  itl_ = registry->GetHistogram(
      "pdserve_router_itl_seconds",
      "Inter-token latency: gap between token events as the router relays them, per token.",
      TokenSecondsBuckets());
  router_queue_ = registry->GetHistogram(
      "pdserve_router_queue_seconds", "Router admission until a decode worker was asked.", buckets);
  prefill_queue_ = registry->GetHistogram(
      "pdserve_router_prefill_queue_seconds",
      "Time queued on the prefill worker before its forward pass (remote prefill only).", buckets);
  decode_admission_ = registry->GetHistogram(
      "pdserve_router_decode_admission_seconds",
      "Decode call until the decode worker reserved the request's KV blocks.", buckets);
  kv_transfer_ = registry->GetHistogram(
      "pdserve_router_kv_transfer_seconds",
      "Prefill worker's last layer computed until the decode worker acked the KV (remote "
      "prefill only).",
      buckets);
  kv_transfer_bytes_ = registry->GetHistogram(
      "pdserve_router_kv_transfer_bytes",
      "KV bytes a prefill worker sent for one request (remote prefill only; cached blocks the "
      "decode worker held are not sent).",
      KvBytesBuckets());
  prefill_compute_ = registry->GetHistogram(
      "pdserve_router_prefill_compute_seconds",
      "Forward pass of the prompt, as reported by the worker that ran it.", buckets);
  for (int tier = 0; tier < 2; ++tier) {
    for (PolicyKind policy : kPolicies) {
      routing_[tier][static_cast<int>(policy)] = registry->GetCounter(
          "pdserve_router_routing_decisions_total", "Workers chosen, by tier and policy.",
          {{"tier", tier == 0 ? "decode" : "prefill"}, {"policy", PolicyKindName(policy)}});
    }
  }
  for (const char* reason : kLocalReasons) {
    prefill_decisions_[absl::StrCat("local/", reason)] = PrefillDecisionCounter(true, reason);
  }
  for (const char* reason : kRemoteReasons) {
    prefill_decisions_[absl::StrCat("remote/", reason)] = PrefillDecisionCounter(false, reason);
  }
  for (bool moved : {false, true}) {
    migrations_[moved ? 1 : 0] = registry_->GetCounter(
        "pdserve_router_decode_migrations_total",
        "Streams a draining decode worker offered, by outcome (moved with their KV, or "
        "recomputed on another decode worker after the move failed).",
        {{"outcome", moved ? "moved" : "recomputed"}});
  }
}

void RouterMetrics::CountMigration(bool moved) { migrations_[moved ? 1 : 0]->Increment(); }

Counter* RouterMetrics::PrefillDecisionCounter(bool local, const std::string& reason) {
  return registry_->GetCounter(kPrefillDecisions, kPrefillDecisionsHelp,
                               {{"where", local ? "local" : "remote"}, {"reason", reason}});
}

void RouterMetrics::ObserveFinished(const v1::Timings& t, int32_t completion_tokens,
                                    absl::Span<const double> inter_token_seconds, Api api) {
  const int a = static_cast<int>(api);
  // A 0 means "not measured" (no token produced, or a worker that leaves
  // the field unset); counting it would drag the low buckets.
  if (t.ttft_ms() > 0) ttft_[a]->Observe(t.ttft_ms() / 1e3);
  e2e_[a]->Observe(t.e2e_ms() / 1e3);
  if (completion_tokens > 0) completion_tokens_[a]->Increment(completion_tokens);
  if (t.ttft_ms() > 0 && completion_tokens > 1) {
    tpot_->Observe((t.e2e_ms() - t.ttft_ms()) / 1e3 / (completion_tokens - 1));
  }
  for (double s : inter_token_seconds) itl_->Observe(s);
  if (t.router_queue_ms() > 0) router_queue_->Observe(t.router_queue_ms() / 1e3);
  if (t.decode_admission_ms() > 0) decode_admission_->Observe(t.decode_admission_ms() / 1e3);
  if (t.prefill_mode() == "remote") {
    if (t.prefill_queue_ms() > 0) prefill_queue_->Observe(t.prefill_queue_ms() / 1e3);
    if (t.kv_transfer_ms() > 0) kv_transfer_->Observe(t.kv_transfer_ms() / 1e3);
    if (t.kv_transfer_bytes() > 0) kv_transfer_bytes_->Observe(t.kv_transfer_bytes());
  }
  if (t.prefill_compute_ms() > 0) prefill_compute_->Observe(t.prefill_compute_ms() / 1e3);
}

void RouterMetrics::CountRequest(grpc::StatusCode code, Api api) {
  const int i = static_cast<int>(code);
  requests_[static_cast<int>(api)][(i >= 0 && i < kNumCodes) ? i : grpc::StatusCode::UNKNOWN]
      ->Increment();
}

void RouterMetrics::CountRouting(RoutingTier tier, PolicyKind policy) {
  routing_[tier == RoutingTier::kDecode ? 0 : 1][static_cast<int>(policy)]->Increment();
}

void RouterMetrics::CountPrefillDecision(bool local, const std::string& reason) {
  auto it = prefill_decisions_.find(absl::StrCat(local ? "local/" : "remote/", reason));
  // The map is read-only after construction; an unknown reason takes the
  // registry's lock instead.
  Counter* counter =
      it != prefill_decisions_.end() ? it->second : PrefillDecisionCounter(local, reason);
  counter->Increment();
}

}  // namespace pdserve::router
