#include "common/worker/worker_flags.h"

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "common/rpc/server_tls_flags.h"
#include "common/worker/engine_runtime_flags.h"

ABSL_FLAG(std::string, kv_secret_file, "",
          "Shared secret file of the KV data plane; both tiers need the same one ('' = off)");
ABSL_FLAG(bool, kv_tls, false,
          "Mutual TLS on the TCP KV data plane, with --tls_cert/--tls_key and peers checked "
          "against --tls_client_ca; both tiers need it");
ABSL_FLAG(std::string, model, "models/SmolLM2-135M-Instruct.Q4_1.gguf", "GGUF model path");
ABSL_FLAG(int32_t, drain_timeout_ms, 30000, "Longest drain on SIGTERM");
ABSL_FLAG(int32_t, metrics_port, 0, "Prometheus /metrics HTTP port (0 = off, -1 = any free port)");
ABSL_FLAG(std::string, port_file, "",
          "Once serving, write the bound ports here (grpc=, metrics=, kv= lines): start with "
          "port 0 and read the real ones back");
ABSL_FLAG(bool, prefix_cache, true, "Reuse cached KV blocks of shared prompt prefixes");

namespace pdserve {

void WorkerConfigFromFlags(WorkerConfig* config) {
  config->model_path = absl::GetFlag(FLAGS_model);
  config->tls = ServerTlsFilesFromFlags();
  config->kv_secret_file = absl::GetFlag(FLAGS_kv_secret_file);
  config->kv_tls = absl::GetFlag(FLAGS_kv_tls);
  config->runtime = EngineRuntimeFlagsFromFlags();
  config->drain_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_drain_timeout_ms));
  config->metrics_port = absl::GetFlag(FLAGS_metrics_port);
  config->port_file = absl::GetFlag(FLAGS_port_file);
  config->prefix_cache = absl::GetFlag(FLAGS_prefix_cache);
}

}  // namespace pdserve
