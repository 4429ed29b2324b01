// Routing policies: pure functions that choose a decode worker and a
// compatible prefill worker from a RegistrySnapshot. They hold no state
// (round robin takes its cursor as `ticket`), so a table of snapshots and
// expected picks tests them completely (tests/unit/routing_policy_test.cc).
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
//
// Thread-safe: no shared state.
#ifndef PDSERVE_ROUTER_ROUTING_POLICY_H_
#define PDSERVE_ROUTER_ROUTING_POLICY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "router/router_config.h"
#include "router/worker_snapshot.h"

namespace pdserve {

struct DecodeQuery {
  PolicyKind policy = PolicyKind::kLeastLoaded;
  int32_t prompt_tokens = 0;
  // The router's model: a decode worker serving another model would turn
  // our token ids into garbage. Empty skips the check.
  std::string model_fingerprint;
  // Workers that already refused this request (RESOURCE_EXHAUSTED).
  std::vector<std::string> excluded;
  uint64_t ticket = 0;
  absl::Time now;
};

// The chosen worker points into `snapshot`. Errors:
//   UNAVAILABLE          no decode worker is live;
//   FAILED_PRECONDITION  live ones exist but none serves the router's model;
//   RESOURCE_EXHAUSTED   every usable one is in `excluded`.
absl::StatusOr<const WorkerState*> PickDecode(const RegistrySnapshot& snapshot,
                                              const DecodeQuery& query);

struct PrefillQuery {
  PolicyKind policy = PolicyKind::kLeastLoaded;
  std::vector<std::string> excluded;
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
// prefills the prompt itself. Local prefill is chosen in colocated mode,
// for prompts of at most `local_prefill_max_tokens` tokens, and when no
// prefill worker is live; live but incompatible prefill workers are an
// error (FAILED_PRECONDITION), never a silent fallback.
struct PlacementQuery {
  DecodeQuery decode;
  PrefillQuery prefill;
  bool colocated = false;
  int32_t local_prefill_max_tokens = 0;
};
struct Placement {
  const WorkerState* decode = nullptr;  // points into the snapshot
  bool local_prefill = false;
  const char* why = "";  // for logs: why this prefill mode
};
absl::StatusOr<Placement> PlaceRequest(const RegistrySnapshot& snapshot,
                                       const PlacementQuery& query);

// OK iff a prefill and a decode worker may be paired: same model
// fingerprint, equal KV layout, same protocol version. FAILED_PRECONDITION
// otherwise, e.g. "prefill worker a:1 model fingerprint abc != decode
// worker b:2 def".
absl::Status CheckPairCompatible(const WorkerState& prefill, const WorkerState& decode);

// "{layers=30 kv_heads=3 head_dim=64 block_size=16 dtype=f16}"
std::string FormatKvLayout(const v1::KvLayout& layout);

}  // namespace pdserve

#endif  // PDSERVE_ROUTER_ROUTING_POLICY_H_
