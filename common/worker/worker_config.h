// WorkerConfig: what the prefill and decode workers' configs hold alike —
// the model and its runtime, the gRPC server, drain, metrics, the port
// file, the KV data plane's secret and the prefix cache. Each tier's config
// extends it with its own fields (PrefillWorkerConfig, DecodeWorkerConfig);
// WorkerHost (worker_host.h) starts what it describes, and
// worker_flags.h fills it from the flags both binaries share.
//
// Thread-safety: a plain value.
#ifndef PDSERVE_COMMON_WORKER_WORKER_CONFIG_H_
#define PDSERVE_COMMON_WORKER_WORKER_CONFIG_H_

#include <string>

#include "absl/time/time.h"
#include "common/rpc/tls_credentials.h"
#include "common/runtime/runtime_factory.h"

namespace pdserve {

struct WorkerConfig {
  std::string model_path;
  // TLS of the worker's gRPC server; a client CA requires the router's
  // certificate (mutual TLS). Empty = plaintext.
  TlsFiles tls;
  // Shared secret of the KV data plane (kv_auth.h); "" = unauthenticated.
  std::string kv_secret_file;
  // Mutual TLS on the TCP KV data plane (common/kv/kv_stream.h) with the
  // `tls` files, `tls.ca` checking the peers; see kv_tls_context.h.
  bool kv_tls = false;
  // The gRPC listen address; each tier's config sets its default port.
  std::string listen;
  // Worker id in logs and WorkerInfo; "" = "<tier>-<pid>".
  std::string worker_id;
  // The engine's device, threads, CUDA graphs and KV pool (block count and
  // size, dtype: "f16" or "int8", which must match the other tier).
  EngineRuntimeFlags runtime;
  absl::Duration drain_timeout = absl::Seconds(30);
  // Prometheus /metrics on 0.0.0.0:metrics_port; 0 = no metrics server,
  // kAnyMetricsPort = one the kernel picks (see port_file).
  int metrics_port = 0;
  // Written once the worker serves: the ports it bound (common/rpc/port_file.h);
  // "" = none.
  std::string port_file;
  // Reuse cached full KV blocks of earlier prompts instead of recomputing
  // (the decode worker: reservations report the cached prefix and receive
  // only the rest, a delta transfer).
  bool prefix_cache = true;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_WORKER_WORKER_CONFIG_H_
