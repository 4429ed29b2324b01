// BlockAllocator: hands out KV-cache block ids from a fixed pool and counts
// references to them, so a block shared by several sequences (prefix reuse)
// leaves use exactly once, when its last owner lets go.
//
// With the prefix cache, a full block whose contents were published (its
// hash-chain key, see common/engine/prefix_cache.h) is not emptied when its last
// reference goes: it is parked, still findable by a later prompt with the
// same prefix, and evicted (least recently parked first) only when an
// allocation finds no empty block. Parked blocks therefore count as free:
// the pool bound and every admission decision are unchanged by caching.
//
// Capacity is memory, not block ids. A block charges its full bytes when
// allocated; when its sliding-window layers' memory goes back to the system
// (KvCache::ReleaseWindowLayers, once decoding has moved every window past
// it) the bytes really returned are refunded. A pool whose windows free
// memory therefore has more ids than its budget in blocks (KvCache sizes
// it), and num_free() is the smaller of the ids left and the budget's bytes
// left in whole blocks: long windowed sequences, which keep ~a window of
// KV per local layer, leave room for more sequences, while the memory in
// use never exceeds the budget. Without windows ids == budget, every block
// charges its full bytes, and this is plain block counting.
//
// An id that leaves use (or is evicted) may still have resident pages: its
// global layers, and window layers still inside a window. With more ids
// than the budget those pages must go back too, or reusing other ids would
// pile up memory nobody is charged for. The allocator collects such ids
// and, at the next Allocate, hands those it did not just reuse (reused ids
// are overwritten, so they cost nothing new) to the release callback
// (KvCache::ReleaseBlocks) in one batch. Between a free and the next
// allocation the pages stay, which never takes memory above what it was.
//
// Not thread-safe: owned by a worker's engine thread.
#ifndef PDSERVE_COMMON_ENGINE_BLOCK_ALLOCATOR_H_
#define PDSERVE_COMMON_ENGINE_BLOCK_ALLOCATOR_H_

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/engine/prefix_cache.h"

namespace pdserve {

class BlockAllocator {
 public:
  // `num_blocks` ids, each charged one unit: plain block counting.
  explicit BlockAllocator(int32_t num_blocks) : BlockAllocator(num_blocks, num_blocks, 1) {}
  // `num_ids` ids (>= budget_blocks) sharing budget_blocks * block_bytes.
  BlockAllocator(int32_t num_ids, int32_t budget_blocks, int64_t block_bytes);

  // The budget, in blocks: what metrics and load reports call the pool.
  int32_t num_blocks() const { return budget_blocks_; }
  // Valid ids are [0, num_ids()).
  int32_t num_ids() const { return static_cast<int32_t>(refcounts_.size()); }
  // Blocks an allocation can take now: ids that are empty or parked, as
  // far as the budget's uncharged bytes (parked blocks' included: they are
  // evicted for room) cover whole blocks.
  int32_t num_free() const;
  int32_t num_used() const { return num_blocks() - num_free(); }
  // Blocks not in use that still hold a cached prefix. They can be evicted
  // for any allocation, but with window-released ones holding little
  // memory, their number may exceed num_free().
  int32_t num_cached_free() const { return cache_.num_parked(); }
  // Blocks that hold a cached prefix, in use or parked.
  int32_t num_cached() const { return cache_.num_cached(); }
  // Read-only view for the load report's key summary.
  const PrefixCache& prefix_cache() const { return cache_; }

  // All `n` blocks with refcount 1, or RESOURCE_EXHAUSTED and no change.
  // Empty blocks go first; then parked cached blocks are evicted, least
  // recently parked first.
  absl::StatusOr<std::vector<int32_t>> Allocate(int32_t n);
  // Adds a reference to a block that is in use, or takes a parked cached
  // block back into use (refcount 1).
  void Ref(int32_t block);
  // Drops a reference; returns true when the block left use (emptied, or
  // parked if it is cached). Releasing an unused block is a bug in our own
  // bookkeeping and CHECK-fails.
  bool Unref(int32_t block);
  // Unrefs in reverse order: a sequence's later blocks are parked first and
  // so evicted first, which keeps the shorter, more widely shared prefixes.
  void UnrefAll(const std::vector<int32_t>& blocks);
  int32_t refcount(int32_t block) const;

  // The cached block holding `tokens` under `key` (in use or parked), or -1.
  // Finding does not reference it: Ref() it to use it.
  int32_t FindCached(uint64_t key, absl::Span<const int32_t> tokens) const {
    return cache_.Find(key, tokens);
  }
  // Publishes the full contents of an in-use block under its key. A key
  // that is already cached keeps its first block; this one stays private.
  void Publish(int32_t block, uint64_t key, absl::Span<const int32_t> tokens);

  // A block in use whose sliding-window layers' KV was given back
  // (KvCache::ReleaseWindowLayers returned `released_bytes`): its global
  // layers still hold the positions, its window layers do not, and the
  // bytes are refunded. Cleared when the block is allocated again. A cached
  // prefix that would read such a block's window layers is not reused
  // (Engine::TakeCachedPrefix).
  void MarkWindowReleased(int32_t block, int64_t released_bytes);
  bool window_released(int32_t block) const { return window_released_[block]; }
  // Bytes charged by blocks in use and parked (for tests and reports).
  int64_t charged_bytes() const { return charged_; }
  // Where ids that left use give their memory back (see the class
  // comment); unset = never (ids == budget: every id is charged in full
  // whenever its pages are written).
  void set_release(std::function<void(absl::Span<const int32_t>)> release) {
    release_ = std::move(release);
  }

 private:
  // Drops a block's charge (it left use, or a parked block was evicted).
  void Uncharge(int32_t block);
  // Evicts the least recently parked block into empty_.
  void EvictOne();
  // Hands dirty_ ids that are still empty to release_.
  void ReleaseDirty();

  const int32_t budget_blocks_;
  const int64_t block_bytes_;
  const int64_t budget_bytes_;
  std::vector<int32_t> refcounts_;
  std::vector<bool> window_released_;
  std::vector<int64_t> charge_;  // bytes each block holds against the budget
  int64_t charged_ = 0;          // sum of charge_ (blocks in use and parked)
  int64_t parked_charge_ = 0;    // the parked blocks' part of it
  std::vector<int32_t> empty_;  // LIFO: recently freed blocks are warm in cache
  // Ids that went empty since the last Allocate, pages maybe resident.
  std::vector<int32_t> dirty_;
  std::function<void(absl::Span<const int32_t>)> release_;
  PrefixCache cache_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_BLOCK_ALLOCATOR_H_
