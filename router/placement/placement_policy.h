// Routing policies: pure functions that choose a decode worker and a
// compatible prefill worker from a RegistrySnapshot. They hold no state
// (round robin takes its cursor as `ticket`), so a table of snapshots and
// expected picks tests them completely (tests/unit/router/placement/placement_policy_test.cc).
//
// least_loaded
//   decode:  among workers whose free KV blocks fit the prompt (all of
//            them if none does, since load reports lag and the worker's own
//            RESOURCE_EXHAUSTED is authoritative): most free blocks, then
//            fewest running + waiting sequences.
//   prefill: fewest queued prompt tokens, then fewest waiting.
//   Exact ties rotate with `ticket`, so a burst that arrives between two
//   load reports is spread instead of piling onto one worker.
// round_robin
//   the usable candidates in configuration order, indexed by `ticket`.
// prefix_aware
//   scores each candidate by the work the request would cost there, in
//   prompt tokens, from the key summary in its load report (prefix_hit.h):
//   decode:  among the workers whose free KV blocks fit the uncached part
//            (all if none does): fewest uncached prompt tokens plus
//            kSequenceCostTokens per running or waiting sequence, then
//            least_loaded's order. A cached prefix saves KV transfer and
//            blocks; a busy worker costs every sequence's decode steps.
//   prefill: fewest uncached prompt tokens plus queued prompt tokens (both
//            are tokens this worker must compute before our first token),
//            then fewest waiting.
//   Without any cached prefix it degrades to a load-only choice.
//
// Thread-safe: no shared state.
#ifndef PDSERVE_ROUTER_PLACEMENT_PLACEMENT_POLICY_H_
#define PDSERVE_ROUTER_PLACEMENT_PLACEMENT_POLICY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "router/config/router_options.h"
#include "router/pool/worker_pairing.h"
#include "router/pool/worker_snapshot.h"

namespace pdserve::router {

// prefix_aware: the prompt tokens one running or waiting sequence is worth.
// A sequence in the batch slows every decode step a little, while a token
// of cached prefix saves its KV transfer and block outright; 64 makes a
// conversation stay on its worker until that worker runs about prefix/64
// more sequences than another.
inline constexpr int32_t kSequenceCostTokens = 64;

struct DecodeQuery {
  PolicyKind policy = PolicyKind::kLeastLoaded;
  int32_t prompt_tokens = 0;
  // Tokens still to generate (0 = unknown): with prompt_tokens, what the
  // decode worker reserves KV blocks for.
  int32_t max_tokens = 0;
  // The prompt's token ids (prefix_aware and the uncached part of
  // PlaceRequest); may be empty. Must outlive the call.
  absl::Span<const int32_t> prompt;
  // The router's model: a decode worker serving another model would turn
  // our token ids into garbage. Empty skips the check.
  std::string model_fingerprint;
  // Workers that already refused this request (RESOURCE_EXHAUSTED).
  std::vector<std::string> excluded;
  // Workers the circuit breaker ejected (circuit_breaker.h): used only when
  // no other usable worker remains.
  std::vector<std::string> ejected;
  uint64_t ticket = 0;
  absl::Time now;
};

// The chosen worker points into `snapshot`. Errors:
//   UNAVAILABLE          no decode worker is live;
//   FAILED_PRECONDITION  live ones exist but none serves the router's model;
//   OUT_OF_RANGE         the request needs more KV blocks than any usable
//                        worker's whole pool holds (it could never run);
//   RESOURCE_EXHAUSTED   every usable one is in `excluded`.
absl::StatusOr<const WorkerState*> PickDecode(const RegistrySnapshot& snapshot,
                                              const DecodeQuery& query);

struct PrefillQuery {
  PolicyKind policy = PolicyKind::kLeastLoaded;
  // The prompt's token ids (prefix_aware); may be empty. Must outlive the
  // call.
  absl::Span<const int32_t> prompt;
  // Workers that already failed this request.
  std::vector<std::string> excluded;
  // Circuit-broken workers: used only when no other usable worker remains.
  std::vector<std::string> ejected;
  uint64_t ticket = 0;
  absl::Time now;
};

// A prefill worker compatible with `decode`. Errors:
//   NOT_FOUND            no prefill worker is live (callers prefill locally);
//   FAILED_PRECONDITION  live ones exist but none is compatible; the message
//                        names each mismatch;
//   UNAVAILABLE          every compatible one is in `excluded`.
absl::StatusOr<const WorkerState*> PickPrefill(const RegistrySnapshot& snapshot,
                                               const WorkerState& decode,
                                               const PrefillQuery& query);

// Where a request runs: its decode worker, and whether that worker
// prefills the prompt itself (conditional disaggregation). Local prefill is
// chosen when forced (colocated mode, decode failover), when the part of
// the prompt the chosen decode worker does not hold in its prefix cache
// has at most `local_prefill_max_tokens` tokens (0 = never), when no
// prefill worker is live, and when every usable compatible prefill worker
// has at least `prefill_saturation_tokens` prompt tokens queued (0 =
// never). A decode worker that only incompatible live prefill workers
// could serve (another KV dtype, layout, model) gives way to the next best
// decode worker; when none pairs, that is an error (FAILED_PRECONDITION),
// never a silent fallback to local prefill.
struct PlacementQuery {
  DecodeQuery decode;
  PrefillQuery prefill;
  bool colocated = false;                     // local prefill is forced
  const char* forced_why = "colocated mode";  // for logs: what forced it
  const char* forced_reason = "forced";       // Placement::reason then
  int32_t local_prefill_max_tokens = 0;
  int64_t prefill_saturation_tokens = 0;
};
struct Placement {
  const WorkerState* decode = nullptr;  // points into the snapshot
  bool local_prefill = false;
  const char* why = "";  // for logs: why this prefill mode
  // For pdserve_router_prefill_decisions_total{reason}: "forced"
  // (--colocated, decode failover), "prefill_fallback" (no prefill worker
  // left for a retry), "short_uncached_prompt", "no_prefill_worker", "prefill_saturated",
  // "no_compatible_prefill_worker" (local) or "prefill_worker_available" (remote).
  const char* reason = "";
  // The decode worker's estimated prefix hit (prefix_hit.h), in tokens.
  int32_t decode_cached_tokens = 0;
};
absl::StatusOr<Placement> PlaceRequest(const RegistrySnapshot& snapshot,
                                       const PlacementQuery& query);

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_PLACEMENT_PLACEMENT_POLICY_H_
