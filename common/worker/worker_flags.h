// The flags both worker binaries define with one meaning, default and help:
//   --model, --kv_secret_file, --kv_tls, --drain_timeout_ms, --metrics_port,
//   --port_file, --prefix_cache
// Defined once here (like engine_runtime_flags.h and server_tls_flags.h) so
// that the two tiers spell them the same way. --listen and --worker_id stay
// in each tier's main.cc: their defaults (port, id prefix) differ.
//
// Only the worker binaries reference this file, so the flags are not linked
// into other programs that link pdserve_worker (the `pdserve` CLI defines
// its own --model).
#ifndef PDSERVE_COMMON_WORKER_WORKER_FLAGS_H_
#define PDSERVE_COMMON_WORKER_WORKER_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "common/worker/worker_config.h"

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(std::string, kv_secret_file);
ABSL_DECLARE_FLAG(bool, kv_tls);
ABSL_DECLARE_FLAG(int32_t, drain_timeout_ms);
ABSL_DECLARE_FLAG(int32_t, metrics_port);
ABSL_DECLARE_FLAG(std::string, port_file);
ABSL_DECLARE_FLAG(bool, prefix_cache);

namespace pdserve {

// Sets what the shared flags, the server TLS flags and the engine runtime
// flags describe: every field of `config` but listen and worker_id.
void WorkerConfigFromFlags(WorkerConfig* config);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_WORKER_WORKER_FLAGS_H_
