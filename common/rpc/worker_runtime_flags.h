// The engine runtime flags both worker binaries share:
//   --threads, --device, --cuda_graphs, --kv_blocks, --block_size, --kv_dtype
// Defined once here (like server_tls_flags.h) so the two tiers spell and
// default them the same way.
#ifndef PDSERVE_COMMON_RPC_WORKER_RUNTIME_FLAGS_H_
#define PDSERVE_COMMON_RPC_WORKER_RUNTIME_FLAGS_H_

#include "common/runtime_factory.h"

namespace pdserve {

EngineRuntimeFlags WorkerRuntimeFlagsFromFlags();

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RPC_WORKER_RUNTIME_FLAGS_H_
