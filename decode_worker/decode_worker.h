// DecodeWorker: the pdserve-decode process — model, KV cache, engine thread,
// KV receiver and the DecodeWorker gRPC service, started together and
// drained together.
#ifndef PDSERVE_DECODE_WORKER_DECODE_WORKER_H_
#define PDSERVE_DECODE_WORKER_DECODE_WORKER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/engine/model_runner.h"
#include "common/kv/framed_kv_receiver.h"
#include "common/metrics/metrics_http_server.h"
#include "common/metrics/metrics_registry.h"
#include "common/rpc/grpc_server.h"
#include "common/rpc/port_file.h"
#include "common/rpc/tls_credentials.h"
#include "common/runtime/runtime_factory.h"
#include "decode_worker/decode_context.h"
#include "decode_worker/decode_service.h"

namespace pdserve::decode {

struct DecodeWorkerConfig {
  std::string model_path;
  // TLS of the worker's gRPC server; a client CA requires the router's
  // certificate (mutual TLS). Empty = plaintext.
  TlsFiles tls;
  // Shared secret of the KV data plane (kv_auth.h); "" = unauthenticated.
  std::string kv_secret_file;
  std::string listen = "0.0.0.0:50071";
  std::string kv_listen = "0.0.0.0:0";
  // Address the prefill workers use for KV; empty = derive from kv_listen
  // (127.0.0.1 when it listens on all interfaces).
  std::string kv_advertise;
  std::string worker_id;
  // The engine's device, threads, CUDA graphs and KV pool (block count and
  // size, dtype: "f16" or "int8", which must match the other tier).
  EngineRuntimeFlags runtime;
  int max_batch_tokens = 512;
  int max_batch = 64;
  // Engine::Options::max_prefill_tokens_while_decoding: local prefill
  // chunks while other streams decode (0 = max_batch_tokens).
  int prefill_tokens_while_decoding = 0;
  absl::Duration kv_wait = absl::Seconds(10);
  absl::Duration drain_timeout = absl::Seconds(30);
  // Prometheus /metrics on 0.0.0.0:metrics_port; 0 = no metrics server,
  // kAnyMetricsPort = one the kernel picks (see port_file).
  int metrics_port = 0;
  // Written once the worker serves: the ports it bound (common/rpc/port_file.h);
  // "" = none.
  std::string port_file;
  // Keep cached full KV blocks of earlier requests: reservations report the
  // cached prefix and receive only the rest (delta transfer).
  bool prefix_cache = true;

  absl::Status Validate() const;
};

class DecodeWorker {
 public:
  static absl::StatusOr<std::unique_ptr<DecodeWorker>> Start(const DecodeWorkerConfig& config);
  ~DecodeWorker();

  int port() const { return server_->port(); }
  BoundPorts bound_ports() const;
  const std::string& kv_endpoint() const { return ctx_.kv_endpoint; }
  // Stops admitting, lets running sequences finish (bounded by the drain
  // timeout), then shuts the server down.
  void Drain();

 private:
  DecodeWorker() = default;

  DecodeWorkerConfig config_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<FramedKvReceiver> receiver_;
  std::unique_ptr<EngineLoop> loop_;
  DecodeContext ctx_;
  std::unique_ptr<DecodeService> service_;
  std::unique_ptr<GrpcServer> server_;
  MetricsRegistry metrics_;
  std::unique_ptr<MetricsHttpServer> metrics_server_;  // null when metrics_port == 0
};

// Runs a decode worker until SIGINT/SIGTERM, then drains.
absl::Status RunDecodeWorker(const DecodeWorkerConfig& config);

}  // namespace pdserve::decode

#endif  // PDSERVE_DECODE_WORKER_DECODE_WORKER_H_
