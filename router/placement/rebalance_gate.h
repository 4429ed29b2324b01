// RebalanceGate: paces the moves off each decode worker whose KV pool is
// nearly full (--rebalance_kv_utilization). Every stream on such a worker
// sees the same load report, and each request's state machine decides for
// itself: without a router-wide gate they would all ask to move at once,
// emptying the worker instead of relieving it. One move per worker per
// `spacing`, longer than a load report's period, so the next decision sees
// the pool after the last move.
//
// Thread-safe (one mutex, a time per worker).
#ifndef PDSERVE_ROUTER_PLACEMENT_REBALANCE_GATE_H_
#define PDSERVE_ROUTER_PLACEMENT_REBALANCE_GATE_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pdserve::router {

class RebalanceGate {
 public:
  explicit RebalanceGate(absl::Duration spacing) : spacing_(spacing) {}

  // True if no move off `worker` started within `spacing` before `now`;
  // the caller then starts one.
  bool TryStart(const std::string& worker, absl::Time now);

 private:
  const absl::Duration spacing_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, absl::Time> last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_PLACEMENT_REBALANCE_GATE_H_
