// WorkerHost: the start-up and shutdown both worker tiers share, so that
// each tier keeps only its own wiring (the prefill worker's KV sender and
// exporter, the decode worker's KV receiver; their contexts, services and
// metrics). Start-up, in order, with the tier's parts in between:
//   Load         the model, and its runtime (KV pool, runner) on the device
//   StartEngine  the engine thread over that runtime
//   Serve        /metrics (when asked for), the gRPC server with the tier's
//                service, and runner-lost handling
// then Drain (SIGTERM), or ServeUntilTerminated (port file, wait for
// SIGINT/SIGTERM, drain).
//
// Shutdown comes in two halves around the tier's parts, which use the KV
// pool and post to the engine thread: Stop() ends scrapes, calls and
// engine steps; the tier then releases its parts; destroying the host
// frees the engine thread, the servers, the runtime and the model.
//
// Thread-safety: start-up, Drain, ServeUntilTerminated, Stop and
// destruction from one thread (the worker's main thread); the accessors
// from any thread once start-up has returned.
#ifndef PDSERVE_COMMON_WORKER_WORKER_HOST_H_
#define PDSERVE_COMMON_WORKER_WORKER_HOST_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/engine/engine.h"
#include "common/engine/engine_loop.h"
#include "common/engine/kv_cache.h"
#include "common/engine/model_runner.h"
#include "common/grammar/grammar_compiler.h"
#include "common/metrics/metrics_http_server.h"
#include "common/metrics/metrics_registry.h"
#include "common/model/model.h"
#include "common/rpc/grpc_server.h"
#include "common/rpc/port_file.h"
#include "common/worker/worker_config.h"
#include "common/worker/worker_drain.h"

namespace pdserve {

class WorkerHost {
 public:
  // Loads the model and creates its runtime on config.runtime's device.
  // `config` has passed its tier's Validate(); `tier` ("prefill",
  // "decode") names the worker when config.worker_id is empty.
  static absl::StatusOr<std::unique_ptr<WorkerHost>> Load(const WorkerConfig& config,
                                                          absl::string_view tier);
  // Stop()s, then frees the engine thread, the servers, the runtime and the
  // model, in that order.
  ~WorkerHost();

  WorkerHost(const WorkerHost&) = delete;
  WorkerHost& operator=(const WorkerHost&) = delete;

  const Model& model() const { return *model_; }
  // Structured output: the model's grammar compiler (thread-safe).
  GrammarCompiler* grammars() const { return grammars_.get(); }
  KvCache* cache() const { return cache_.get(); }
  const std::string& worker_id() const { return worker_id_; }

  // Starts the engine thread over the runtime. Once, after Load.
  EngineLoop* StartEngine(const Engine::Options& options);

  // Serves `service`: first /metrics when config.metrics_port != 0, with
  // `register_metrics` filling its registry; then gRPC on config.listen. A
  // lost device sets `*draining` and turns health NOT_SERVING for good, so
  // the router places work elsewhere. Once, after StartEngine. `service`
  // and `draining` (the tier's) outlive the host.
  absl::Status Serve(grpc::Service* service, std::atomic<bool>* draining,
                     const std::function<void(MetricsRegistry*)>& register_metrics);

  int port() const { return server_->port(); }
  // The gRPC and metrics ports; a tier with a KV listener adds its port.
  BoundPorts bound_ports() const;

  // Stops admitting (`*draining`, NOT_SERVING), lets running sequences
  // finish or the drain hook move them (bounded by the drain timeout),
  // then shuts the server down. Returns whether it got idle (every KV
  // block free) before the drain timeout.
  bool Drain();
  // What the tier does with its in-flight work during Drain (before the
  // wait for idle). Set once, before the first Drain.
  void SetDrainHook(DrainHook hook) { drain_hook_ = std::move(hook); }
  // Writes the port file (`ports`), serves until SIGINT/SIGTERM, then
  // drains.
  absl::Status ServeUntilTerminated(const BoundPorts& ports);

  // The first half of shutdown: no more scrapes (they read the loop), no
  // more calls, then no more engine steps. Idempotent; safe after a
  // start-up that failed part way.
  void Stop();

 private:
  WorkerHost(const WorkerConfig& config, std::string worker_id)
      : config_(config), worker_id_(std::move(worker_id)) {}

  absl::Status ServeMetrics(const std::function<void(MetricsRegistry*)>& register_metrics);
  absl::Status ServeGrpc(grpc::Service* service);

  const WorkerConfig config_;
  const std::string worker_id_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<GrammarCompiler> grammars_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<EngineLoop> loop_;
  std::atomic<bool>* draining_ = nullptr;  // the tier's; set by Serve
  std::unique_ptr<GrpcServer> server_;
  std::atomic<bool> grpc_up_{false};  // server_ started (what /readyz reads)
  DrainHook drain_hook_;
  MetricsRegistry metrics_;
  std::unique_ptr<MetricsHttpServer> metrics_server_;  // null when metrics_port == 0
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_WORKER_WORKER_HOST_H_
