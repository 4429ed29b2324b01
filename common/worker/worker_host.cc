#include "common/worker/worker_host.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/grammar/tokenizer_vocab.h"
#include "common/rpc/tls_credentials.h"
#include "common/runtime/runtime_factory.h"
#include "common/worker/worker_drain.h"

namespace pdserve {

absl::StatusOr<std::unique_ptr<WorkerHost>> WorkerHost::Load(const WorkerConfig& config,
                                                             absl::string_view tier) {
  std::string worker_id =
      config.worker_id.empty() ? absl::StrCat(tier, "-", getpid()) : config.worker_id;
  std::unique_ptr<WorkerHost> host(new WorkerHost(config, std::move(worker_id)));
  ASSIGN_OR_RETURN(host->model_, Model::Load(config.model_path));
  ASSIGN_OR_RETURN(host->grammars_,
                   NewGrammarCompiler(host->model_->tokenizer(), host->model_->config().n_vocab));
  ASSIGN_OR_RETURN(EngineRuntime rt, CreateEngineRuntime(*host->model_, config.runtime));
  host->cache_ = std::move(rt.cache);
  host->runner_ = std::move(rt.runner);
  return host;
}

EngineLoop* WorkerHost::StartEngine(const Engine::Options& options) {
  auto engine =
      std::make_unique<Engine>(&model_->tokenizer(), runner_.get(), cache_.get(), options);
  loop_ = std::make_unique<EngineLoop>(std::move(engine));
  return loop_.get();
}

absl::Status WorkerHost::Serve(grpc::Service* service, std::atomic<bool>* draining,
                               const std::function<void(MetricsRegistry*)>& register_metrics) {
  draining_ = draining;
  RETURN_IF_ERROR(ServeMetrics(register_metrics));
  RETURN_IF_ERROR(ServeGrpc(service));
  // A lost device ends admission for good: health turns NOT_SERVING and
  // load reports say draining, so the router places work elsewhere.
  loop_->OnRunnerLost([draining, server = server_.get()](const absl::Status&) {
    draining->store(true);
    server->SetServing(false);
  });
  return absl::OkStatus();
}

absl::Status WorkerHost::ServeMetrics(
    const std::function<void(MetricsRegistry*)>& register_metrics) {
  if (config_.metrics_port == 0) return absl::OkStatus();
  register_metrics(&metrics_);
  MetricsHttpServerOptions mo;
  mo.listen_address = MetricsListenAddress(config_.metrics_port);
  // Ready as the gRPC health check says: up and not draining.
  mo.ready = [this] { return grpc_up_.load() && !draining_->load(); };
  ASSIGN_OR_RETURN(metrics_server_, MetricsHttpServer::Start(mo, &metrics_));
  return absl::OkStatus();
}

absl::Status WorkerHost::ServeGrpc(grpc::Service* service) {
  GrpcServerOptions so;
  so.listen_address = config_.listen;
  so.services = {service};
  ASSIGN_OR_RETURN(so.credentials, MakeServerCredentials(config_.tls));
  ASSIGN_OR_RETURN(server_, GrpcServer::Start(so));
  grpc_up_.store(true);
  return absl::OkStatus();
}

BoundPorts WorkerHost::bound_ports() const {
  return {.grpc = port(), .metrics = metrics_server_ ? metrics_server_->port() : 0};
}

bool WorkerHost::Drain() {
  return DrainWorker(*draining_, *server_, *loop_, config_.drain_timeout, drain_hook_);
}

absl::Status WorkerHost::ServeUntilTerminated(const BoundPorts& ports) {
  RETURN_IF_ERROR(WritePortFile(config_.port_file, ports));
  WaitForTerminationSignal();
  Drain();
  return absl::OkStatus();
}

void WorkerHost::Stop() {
  metrics_server_.reset();
  if (server_) server_->Shutdown(absl::ZeroDuration());
  if (loop_) loop_->Stop();
}

// After Stop: the engine thread (its queued closures may hold calls'
// state), then, by member order, the servers, the runner, the KV pool and
// the model the runner reads.
WorkerHost::~WorkerHost() {
  Stop();
  loop_.reset();
}

}  // namespace pdserve
