// How many KV blocks a share of a device's free memory holds: the GPU
// worker's --kv_memory_fraction. A fixed --kv_blocks sized for a CPU pool
// leaves most of an 80 GB card idle (and makes the decode autoscaler add
// whole GPUs early), while one sized for one card overflows a smaller one;
// a fraction of what is free once the weights are loaded fits every card.
#ifndef PDSERVE_COMMON_RUNTIME_KV_MEMORY_BUDGET_H_
#define PDSERVE_COMMON_RUNTIME_KV_MEMORY_BUDGET_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/engine/kv_cache.h"

namespace pdserve {

// INVALID_ARGUMENT unless 0 < fraction < 1 (0 itself means "unset" to
// callers and is not passed here).
absl::Status ValidateKvMemoryFraction(double fraction);

// The whole blocks of `layout` that `fraction` of `free_bytes` holds;
// RESOURCE_EXHAUSTED when that is not one block, INVALID_ARGUMENT when the
// count would not fit the pool's int32 block ids.
absl::StatusOr<int32_t> KvBlocksForMemory(const KvLayout& layout, double fraction,
                                          uint64_t free_bytes);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RUNTIME_KV_MEMORY_BUDGET_H_
