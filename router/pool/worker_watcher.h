// WorkerWatcher: keeps the router's view of one worker current. It runs the
// compatibility handshake (GetInfo) and then holds a WatchLoad stream open,
// reporting every change of the worker's state to a listener. When the
// stream breaks, the worker is reported not live and the watcher reconnects
// with exponential backoff (reset once a session delivered a report).
//
// Owns one thread, which blocks in the synchronous gRPC API; a watcher per
// configured worker is cheap at the scale of a static worker list. The
// listener runs on that thread. Stop() (and the destructor) cancel the
// in-flight RPC and join the thread; they may be called from any thread
// but not from the listener.
#ifndef PDSERVE_ROUTER_POOL_WORKER_WATCHER_H_
#define PDSERVE_ROUTER_POOL_WORKER_WATCHER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "router/pool/worker_snapshot.h"

namespace pdserve::router {

class WorkerWatcher {
 public:
  struct Options {
    std::string address;
    v1::WorkerRole role = v1::WORKER_ROLE_DECODE;
    absl::Duration load_interval = absl::Milliseconds(200);
    absl::Duration handshake_timeout = absl::Seconds(3);
    absl::Duration min_backoff = absl::Milliseconds(100);
    absl::Duration max_backoff = absl::Seconds(1);
  };
  using Listener = std::function<void(const WorkerState&)>;

  WorkerWatcher(Options options, std::shared_ptr<grpc::Channel> channel, Listener listener);
  ~WorkerWatcher();

  WorkerWatcher(const WorkerWatcher&) = delete;
  WorkerWatcher& operator=(const WorkerWatcher&) = delete;

  void Start();
  void Stop();

  // The role-specific RPCs the watcher uses (defined in the .cc: the two
  // worker services have identical control methods but distinct stubs).
  class ControlStub;

 private:
  void Loop();
  // One handshake + load stream; returns why it ended. Sets
  // `*delivered` when at least one report arrived.
  absl::Status RunSession(bool* delivered);
  absl::Status Handshake();
  void Publish();
  // Registers `ctx` as the RPC Stop() must cancel; false when stopping.
  bool Arm(grpc::ClientContext* ctx);
  void Disarm();
  bool Stopping();
  // Sleeps for `d` unless stopped first; false when stopping.
  bool Sleep(absl::Duration d);

  const Options options_;
  std::unique_ptr<ControlStub> stub_;
  const Listener listener_;
  // Touched only by the watcher thread.
  WorkerState state_;
  absl::BitGen bitgen_;
  std::thread thread_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* in_flight_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_POOL_WORKER_WATCHER_H_
