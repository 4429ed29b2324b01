// WorkerSnapshot: what the router knows about every configured worker at
// one instant — its handshake (WorkerInfo), its last load report and
// whether its load stream is up. The WorkerRegistry publishes a new
// immutable RegistrySnapshot on every change; routing policies read one
// without locks, so a decision is always made over a consistent picture.
//
// Plain data; immutable once published (shared as shared_ptr<const ...>).
#ifndef PDSERVE_ROUTER_POOL_WORKER_SNAPSHOT_H_
#define PDSERVE_ROUTER_POOL_WORKER_SNAPSHOT_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "pdserve/v1/worker.pb.h"

namespace pdserve::router {

struct WorkerState {
  std::string address;  // "host:port", the worker's identity in the router
  v1::WorkerRole role = v1::WORKER_ROLE_UNSPECIFIED;
  // The load stream is open and has delivered at least one report since
  // the last successful handshake.
  bool live = false;
  bool has_info = false;
  v1::WorkerInfo info;
  v1::LoadReport load;
  absl::Time last_report = absl::InfinitePast();
};

struct RegistrySnapshot {
  std::vector<WorkerState> decode;
  std::vector<WorkerState> prefill;
  // A worker whose stream is open but silent for longer than this is
  // treated as not live: a wedged process must not attract requests.
  absl::Duration stale_after = absl::Seconds(2);

  // nullptr when `address` is not a decode (prefill) worker.
  const WorkerState* FindDecode(const std::string& address) const { return Find(decode, address); }
  const WorkerState* FindPrefill(const std::string& address) const {
    return Find(prefill, address);
  }

 private:
  static const WorkerState* Find(const std::vector<WorkerState>& tier, const std::string& address) {
    for (const WorkerState& w : tier) {
      if (w.address == address) return &w;
    }
    return nullptr;
  }
};

// Live, fresh and willing to take new requests (not draining).
inline bool IsUsable(const WorkerState& w, absl::Duration stale_after, absl::Time now) {
  return w.live && w.has_info && now - w.last_report <= stale_after && !w.load.draining();
}

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_POOL_WORKER_SNAPSHOT_H_
