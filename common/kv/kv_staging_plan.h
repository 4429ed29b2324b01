// KvStagingPlan: how the blocks of one KV frame (equal-sized layer-blocks,
// scattered over a paged pool) go through a bounded staging buffer: in runs
// of whole blocks, each run packed block after block from offset 0. Device
// transports gather a run into staging, move it, and scatter it on the other
// side; both ends derive the same runs from (blocks, block bytes, capacity),
// so the chunk sizes never need to travel.
//
// Pure arithmetic, no device code: tested on CPU (kv_staging_plan_test).
#ifndef PDSERVE_COMMON_KV_KV_STAGING_PLAN_H_
#define PDSERVE_COMMON_KV_KV_STAGING_PLAN_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"

namespace pdserve {

struct StagingRun {
  size_t first_block = 0;  // index into the frame's block list
  size_t num_blocks = 0;
  size_t block_bytes = 0;

  size_t bytes() const;  // packed size in the staging buffer
  bool operator==(const StagingRun&) const = default;
};

// Runs covering blocks [0, num_blocks) in order, each at most `capacity`
// bytes and as large as it can be. INVALID_ARGUMENT when a single block
// does not fit, or block_bytes is 0.
absl::StatusOr<std::vector<StagingRun>> PlanStagingRuns(size_t num_blocks, size_t block_bytes,
                                                        size_t capacity);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_STAGING_PLAN_H_
