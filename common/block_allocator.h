// BlockAllocator: hands out KV-cache block ids from a fixed pool and counts
// references to them, so a block shared by several sequences (prefix reuse)
// returns to the pool exactly once, when its last owner lets go.
//
// Not thread-safe: owned by a worker's engine thread (DESIGN.md §5).
#ifndef PDSERVE_COMMON_BLOCK_ALLOCATOR_H_
#define PDSERVE_COMMON_BLOCK_ALLOCATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace pdserve {

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(refcounts_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used() const { return num_blocks() - num_free(); }

  // All `n` blocks with refcount 1, or RESOURCE_EXHAUSTED and no change.
  absl::StatusOr<std::vector<int32_t>> Allocate(int32_t n);
  // Adds a reference to a block that is in use.
  void Ref(int32_t block);
  // Drops a reference; returns true when the block went back to the pool.
  // Releasing a free block is a bug in our own bookkeeping and CHECK-fails.
  bool Unref(int32_t block);
  void UnrefAll(const std::vector<int32_t>& blocks);
  int32_t refcount(int32_t block) const;

 private:
  std::vector<int32_t> refcounts_;
  std::vector<int32_t> free_;  // LIFO: recently freed blocks are warm in cache
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_BLOCK_ALLOCATOR_H_
