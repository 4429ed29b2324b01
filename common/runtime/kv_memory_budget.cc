#include "common/runtime/kv_memory_budget.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace pdserve {

absl::Status ValidateKvMemoryFraction(double fraction) {
  // Not 1: the runtime needs some room of its own (cuBLAS workspaces, CUDA
  // graphs, NCCL buffers) after the pool is taken.
  if (!(fraction > 0.0 && fraction < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv_memory_fraction must be in (0, 1), got ", fraction));
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> KvBlocksForMemory(const KvLayout& layout, double fraction,
                                          uint64_t free_bytes) {
  if (absl::Status st = ValidateKvMemoryFraction(fraction); !st.ok()) return st;
  const size_t block_bytes = KvCache::PoolBytes(layout, 1);
  const double budget = std::floor(fraction * static_cast<double>(free_bytes));
  const double blocks = std::floor(budget / static_cast<double>(block_bytes));
  if (blocks < 1) {
    return absl::ResourceExhaustedError(
        absl::StrCat("--kv_memory_fraction=", fraction, " of ", free_bytes,
                     " free bytes is less than one KV block (", block_bytes, " bytes)"));
  }
  if (blocks > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv_memory_fraction=", fraction, " gives ", blocks,
                     " KV blocks, more than a pool can number; use a smaller fraction"));
  }
  return static_cast<int32_t>(blocks);
}

}  // namespace pdserve
