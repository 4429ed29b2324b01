#include "common/kv/kv_staging_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pdserve {

size_t StagingRun::bytes() const { return num_blocks * block_bytes; }

absl::StatusOr<std::vector<StagingRun>> PlanStagingRuns(size_t num_blocks, size_t block_bytes,
                                                        size_t capacity) {
  if (block_bytes == 0) return absl::InvalidArgumentError("kv staging: zero-byte blocks");
  if (block_bytes > capacity) {
    return absl::InvalidArgumentError(absl::StrCat("kv staging: a ", block_bytes,
                                                   "-byte block does not fit a ", capacity,
                                                   "-byte staging buffer"));
  }
  const size_t per_run = capacity / block_bytes;
  std::vector<StagingRun> runs;
  runs.reserve((num_blocks + per_run - 1) / per_run);
  for (size_t first = 0; first < num_blocks; first += per_run) {
    runs.push_back({first, std::min(per_run, num_blocks - first), block_bytes});
  }
  return runs;
}

}  // namespace pdserve
