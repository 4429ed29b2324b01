// Whether a prefill worker's KV can be handed to a decode worker: both
// serve the same model with the same KV layout and wire protocol. The
// placement policy pairs only compatible workers; the worker watcher logs
// each worker's layout in the same words.
#ifndef PDSERVE_ROUTER_POOL_WORKER_PAIRING_H_
#define PDSERVE_ROUTER_POOL_WORKER_PAIRING_H_

#include <string>

#include "absl/status/status.h"
#include "pdserve/v1/worker.pb.h"
#include "router/pool/worker_snapshot.h"

namespace pdserve::router {

// OK iff a prefill and a decode worker may be paired: same model
// fingerprint, equal KV layout, same protocol version. FAILED_PRECONDITION
// otherwise, e.g. "prefill worker a:1 model fingerprint abc != decode
// worker b:2 def".
absl::Status CheckPairCompatible(const WorkerState& prefill, const WorkerState& decode);

// "{layers=30 kv_heads=3 head_dim=64 block_size=16 dtype=f16}"
std::string FormatKvLayout(const v1::KvLayout& layout);

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_POOL_WORKER_PAIRING_H_
