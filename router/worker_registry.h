// WorkerRegistry: the router's set of workers. For each configured address
// it owns a gRPC channel (shared by the control stream and the request
// RPCs), the role's stub and a WorkerWatcher, and it publishes what the
// watchers learn as an immutable RegistrySnapshot.
//
// Thread-safe. snapshot() is cheap (a shared_ptr copy under a mutex) and the
// snapshot it returns never changes, so routing decisions read it without
// locks. Stubs are created once at construction and live as long as the
// registry; the worker list is static for now (DNS discovery would add
// entries, never remove a stub that a request may still use).
#ifndef PDSERVE_ROUTER_WORKER_REGISTRY_H_
#define PDSERVE_ROUTER_WORKER_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pdserve/v1/worker.grpc.pb.h"
#include "router/worker_snapshot.h"
#include "router/worker_watcher.h"

namespace pdserve {

class WorkerRegistry {
 public:
  struct Options {
    std::vector<std::string> decode_addresses;
    std::vector<std::string> prefill_addresses;
    absl::Duration load_interval = absl::Milliseconds(200);
  };
  // Called on a watcher thread after each published change; must not block
  // and must not call back into the registry's Stop().
  using ChangeListener = std::function<void(const RegistrySnapshot&)>;

  explicit WorkerRegistry(const Options& options);
  ~WorkerRegistry();

  WorkerRegistry(const WorkerRegistry&) = delete;
  WorkerRegistry& operator=(const WorkerRegistry&) = delete;

  // Set before Start().
  void set_change_listener(ChangeListener listener) { listener_ = std::move(listener); }
  // Starts the watchers; workers become live as their handshakes succeed.
  void Start();
  // Stops and joins the watchers. Idempotent.
  void Stop();

  std::shared_ptr<const RegistrySnapshot> snapshot() const;

  // nullptr for an address that is not configured in that role.
  v1::DecodeWorker::Stub* decode_stub(const std::string& address) const;
  v1::PrefillWorker::Stub* prefill_stub(const std::string& address) const;

 private:
  void OnWorkerState(const WorkerState& state);

  ChangeListener listener_;
  absl::flat_hash_map<std::string, std::unique_ptr<v1::DecodeWorker::Stub>> decode_stubs_;
  absl::flat_hash_map<std::string, std::unique_ptr<v1::PrefillWorker::Stub>> prefill_stubs_;
  std::vector<std::unique_ptr<WorkerWatcher>> watchers_;

  mutable absl::Mutex mu_;
  // The working copy the watchers update; each update publishes a copy.
  RegistrySnapshot current_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const RegistrySnapshot> published_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdserve

#endif  // PDSERVE_ROUTER_WORKER_REGISTRY_H_
