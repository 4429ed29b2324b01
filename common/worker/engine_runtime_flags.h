// The engine runtime flags the worker binaries and the `pdserve` CLI share:
//   --threads, --device, --cuda_graphs, --kv_blocks, --kv_memory_fraction,
//   --block_size, --kv_dtype
// Defined once here (like server_tls_flags.h) so the two tiers and the CLI
// spell and default them the same way.
#ifndef PDSERVE_COMMON_WORKER_ENGINE_RUNTIME_FLAGS_H_
#define PDSERVE_COMMON_WORKER_ENGINE_RUNTIME_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "common/runtime/runtime_factory.h"

ABSL_DECLARE_FLAG(int32_t, threads);
ABSL_DECLARE_FLAG(std::string, device);
ABSL_DECLARE_FLAG(bool, cuda_graphs);
ABSL_DECLARE_FLAG(int32_t, kv_blocks);
ABSL_DECLARE_FLAG(double, kv_memory_fraction);
ABSL_DECLARE_FLAG(int32_t, block_size);
ABSL_DECLARE_FLAG(std::string, kv_dtype);

namespace pdserve {

EngineRuntimeFlags EngineRuntimeFlagsFromFlags();

}  // namespace pdserve

#endif  // PDSERVE_COMMON_WORKER_ENGINE_RUNTIME_FLAGS_H_
