// WorkerRegistry: the router's set of workers. Each --prefill/--decode
// target (worker_target.h) is either one static worker or a DNS name that
// expands into one worker per resolved address. For each worker it owns a
// gRPC channel (shared by the control stream and the request RPCs), the
// role's stub and a WorkerWatcher, and it publishes what the watchers learn
// as an immutable RegistrySnapshot.
//
// DNS targets are re-resolved on the registry's own thread every
// `dns_refresh`: addresses that appear join the pool (handshake and load
// stream as for a static worker), addresses that disappear leave it. A
// failed or empty resolution keeps the last known set — a DNS hiccup must
// not empty the pool; workers that really went away stop reporting and
// are no longer live, so the policies skip them anyway.
//
// Thread-safe. snapshot() is cheap (a shared_ptr copy under a mutex) and the
// snapshot it returns never changes, so routing decisions read it without
// locks. The stubs are handed out as shared_ptrs (each stub holds its
// channel): a request keeps its worker's channel alive until its RPC ends,
// even after that worker left the pool.
#ifndef PDSERVE_ROUTER_POOL_WORKER_REGISTRY_H_
#define PDSERVE_ROUTER_POOL_WORKER_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/security/credentials.h"
#include "pdserve/v1/worker.grpc.pb.h"
#include "router/config/worker_target.h"
#include "router/pool/dns_resolver.h"
#include "router/pool/worker_snapshot.h"
#include "router/pool/worker_watcher.h"

namespace pdserve::router {

class WorkerRegistry {
 public:
  struct Options {
    // Worker targets: "host:port" or "dns:///host:port" (worker_target.h).
    // Callers validate them first (RouterConfig::Validate); an invalid one
    // is logged and ignored.
    std::vector<std::string> decode_addresses;
    std::vector<std::string> prefill_addresses;
    absl::Duration load_interval = absl::Milliseconds(200);
    // How often DNS targets are re-resolved.
    absl::Duration dns_refresh = absl::Seconds(5);
    // Null: ResolveWithGetAddrInfo. Tests inject scripted answers.
    DnsResolver resolver;
    // Credentials of the channels to workers; null = insecure.
    std::shared_ptr<grpc::ChannelCredentials> credentials;
  };
  // Called on a watcher thread or the registry's thread after each
  // published change; must not block and must not call back into the
  // registry's Stop().
  using ChangeListener = std::function<void(const RegistrySnapshot&)>;

  explicit WorkerRegistry(const Options& options);
  ~WorkerRegistry();

  WorkerRegistry(const WorkerRegistry&) = delete;
  WorkerRegistry& operator=(const WorkerRegistry&) = delete;

  // Set before Start().
  void set_change_listener(ChangeListener listener) { listener_ = std::move(listener); }
  // Starts the watchers and, with DNS targets, the refresh thread (which
  // resolves at once); workers become live as their handshakes succeed.
  void Start();
  // Stops and joins the refresh thread and the watchers. Idempotent.
  void Stop();

  std::shared_ptr<const RegistrySnapshot> snapshot() const;

  // nullptr for an address that is not (or no longer) in that role's pool.
  std::shared_ptr<v1::DecodeWorker::Stub> decode_stub(const std::string& address) const;
  std::shared_ptr<v1::PrefillWorker::Stub> prefill_stub(const std::string& address) const;

 private:
  struct DnsTarget {
    WorkerTarget target;
    std::vector<std::string> addresses;  // last known "ip:port" set
    bool failing = false;                // the last resolution failed
  };
  // One role's targets and workers. The watchers are touched by the
  // constructor, Start(), the refresh thread and Stop() (after joining it).
  struct Tier {
    v1::WorkerRole role = v1::WORKER_ROLE_UNSPECIFIED;
    std::vector<std::string> static_addresses;
    std::vector<DnsTarget> dns;
    absl::flat_hash_map<std::string, std::unique_ptr<WorkerWatcher>> watchers;
  };

  void AddTargets(const std::vector<std::string>& targets, Tier* tier);
  // `tls_name`: the name the worker's TLS certificate must carry ("" = the
  // host of `address`).
  void AddWorker(const std::string& address, const std::string& tls_name, bool start, Tier* tier);
  void RemoveWorker(const std::string& address, Tier* tier);
  // Brings the tier's workers in line with its static and DNS addresses.
  void Reconcile(Tier* tier);
  void Resolve(DnsTarget* dns);
  void RefreshLoop();
  // Sleeps for `d` unless stopped first; false when stopping.
  bool SleepUnlessStopped(absl::Duration d);
  void OnWorkerState(const WorkerState& state);
  // Publishes current_ (mu_ held); returns what to hand the listener.
  std::shared_ptr<const RegistrySnapshot> PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify(const std::shared_ptr<const RegistrySnapshot>& published);

  const absl::Duration load_interval_;
  const absl::Duration dns_refresh_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  const DnsResolver resolver_;
  ChangeListener listener_;
  Tier decode_;
  Tier prefill_;
  // Set by Start() before the refresh thread exists; workers that thread
  // adds start watching at once.
  bool started_ = false;
  std::thread refresh_thread_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, std::shared_ptr<v1::DecodeWorker::Stub>> decode_stubs_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<v1::PrefillWorker::Stub>> prefill_stubs_
      ABSL_GUARDED_BY(mu_);
  // The working copy the watchers update; each update publishes a copy.
  RegistrySnapshot current_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const RegistrySnapshot> published_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_POOL_WORKER_REGISTRY_H_
