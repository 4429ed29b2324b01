// PrefillWorker: the pdserve-prefill process — model, KV cache, engine
// thread with the KV exporter as its layer hook, the KV sender and the
// PrefillWorker gRPC service.
#ifndef PDSERVE_PREFILL_WORKER_PREFILL_WORKER_H_
#define PDSERVE_PREFILL_WORKER_PREFILL_WORKER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/engine/model_runner.h"
#include "common/kv/framed_kv_sender.h"
#include "common/metrics/metrics_http_server.h"
#include "common/metrics/metrics_registry.h"
#include "common/rpc/grpc_server.h"
#include "common/rpc/port_file.h"
#include "common/rpc/tls_credentials.h"
#include "common/runtime/runtime_factory.h"
#include "prefill_worker/prefill_context.h"
#include "prefill_worker/prefill_service.h"

namespace pdserve::prefill {

struct PrefillWorkerConfig {
  std::string model_path;
  // TLS of the worker's gRPC server; a client CA requires the router's
  // certificate (mutual TLS). Empty = plaintext.
  TlsFiles tls;
  // Shared secret of the KV data plane (kv_auth.h); "" = unauthenticated.
  std::string kv_secret_file;
  std::string listen = "0.0.0.0:50061";
  std::string worker_id;
  // The engine's device, threads, CUDA graphs and KV pool (block count and
  // size, dtype: "f16" or "int8", which must match the other tier).
  EngineRuntimeFlags runtime;
  // KV path to decode workers (common/kv/kv_path.h): auto, tcp or cuda_ipc.
  std::string kv_transport = "auto";
  int max_batch_tokens = 512;
  int max_batch = 16;
  int commit_threads = 4;
  absl::Duration drain_timeout = absl::Seconds(30);
  // Prometheus /metrics on 0.0.0.0:metrics_port; 0 = no metrics server,
  // kAnyMetricsPort = one the kernel picks (see port_file).
  int metrics_port = 0;
  // Written once the worker serves: the ports it bound (common/rpc/port_file.h);
  // "" = none.
  std::string port_file;
  // Reuse cached full KV blocks of earlier prompts instead of recomputing.
  bool prefix_cache = true;

  absl::Status Validate() const;
};

class PrefillWorker {
 public:
  static absl::StatusOr<std::unique_ptr<PrefillWorker>> Start(const PrefillWorkerConfig& config);
  ~PrefillWorker();

  int port() const { return server_->port(); }
  BoundPorts bound_ports() const;
  void Drain();

 private:
  PrefillWorker() = default;

  PrefillWorkerConfig config_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<FramedKvSender> sender_;
  std::unique_ptr<KvExporter> exporter_;
  std::unique_ptr<EngineLoop> loop_;
  PrefillContext ctx_;
  std::unique_ptr<PrefillService> service_;
  std::unique_ptr<GrpcServer> server_;
  MetricsRegistry metrics_;
  std::unique_ptr<MetricsHttpServer> metrics_server_;  // null when metrics_port == 0
};

absl::Status RunPrefillWorker(const PrefillWorkerConfig& config);

}  // namespace pdserve::prefill

#endif  // PDSERVE_PREFILL_WORKER_PREFILL_WORKER_H_
