// RouterServer: a running pdserve-router — the tokenizer-only model, the
// worker registry, the Generation service, the gRPC server carrying it
// together with the standard health (grpc.health.v1) and reflection
// services (common/rpc/grpc_server.h), and the OpenAI-compatible HTTP API
// in front of it (router/openai). Health is SERVING while at least one decode worker serving
// the router's model is live.
//
// Tests start one in-process on port 0; Run() is the binary's main loop.
// Start()/Shutdown() from one thread; the rest is thread-safe.
#ifndef PDSERVE_ROUTER_ROUTER_SERVER_H_
#define PDSERVE_ROUTER_ROUTER_SERVER_H_

#include <atomic>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/grammar/grammar_compiler.h"
#include "common/metrics/metrics_http_server.h"
#include "common/metrics/metrics_registry.h"
#include "common/model/model_card.h"
#include "common/rpc/grpc_server.h"
#include "router/api/generation_service.h"
#include "router/api/openai/openai_front.h"
#include "router/call/router_metrics.h"
#include "router/config/router_config.h"
#include "router/pool/worker_registry.h"

namespace pdserve::router {

class RouterServer {
 public:
  // Validates `config`, loads the tokenizer and starts serving.
  static absl::StatusOr<std::unique_ptr<RouterServer>> Start(const RouterConfig& config);
  ~RouterServer();

  RouterServer(const RouterServer&) = delete;
  RouterServer& operator=(const RouterServer&) = delete;

  // The bound port (useful with listen port 0).
  int port() const { return port_; }
  // The metrics server's bound port; 0 without one.
  int metrics_port() const { return metrics_server_ ? metrics_server_->port() : 0; }
  // The OpenAI-compatible HTTP API's bound port; 0 without one.
  int http_port() const { return http_ ? http_->port() : 0; }
  const GenerationService& service() const { return *service_; }
  const WorkerRegistry& registry() const { return *registry_; }

  // Drain: stop accepting requests, give in-flight ones `grace` to finish,
  // cancel the rest, and wait until every call (and its worker RPCs) ended.
  // Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  explicit RouterServer(const RouterConfig& config) : config_(config) {}
  // Readiness and the decode pool's KV gauge, from each registry snapshot.
  void UpdateHealth(const RegistrySnapshot& snapshot);
  // The OpenAI-compatible HTTP API, a client of server_.
  absl::Status StartHttp();

  const RouterConfig config_;
  // Declared before the service, which records into them until it is gone.
  MetricsRegistry metrics_registry_;
  RouterMetrics metrics_{&metrics_registry_};
  // Last health status published (-1: none yet); avoids re-publishing on
  // every load report. Read by /readyz and the HTTP API, so declared before
  // them.
  std::atomic<int> serving_{-1};
  std::atomic<bool> draining_{false};                  // Shutdown began: serving_ stays 0
  std::unique_ptr<MetricsHttpServer> metrics_server_;  // null when metrics_port == 0
  std::unique_ptr<ModelCard> model_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<GrammarCompiler> grammars_;  // before service_: it outlives it
  std::unique_ptr<GenerationService> service_;
  std::unique_ptr<GrpcServer> server_;
  // A client of server_ (in-process), so it goes first.
  std::unique_ptr<openai::OpenAiFront> http_;
  int port_ = 0;
  bool shut_down_ = false;
};

// Serves until SIGTERM or SIGINT, then drains (--drain_timeout_ms).
absl::Status Run(const RouterConfig& config);

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_ROUTER_SERVER_H_
