// PrefixCache: which KV blocks hold which full-block prefix, and the order
// in which the unreferenced ones are given up.
//
// A cached block is keyed by its hash-chain key (common/request/block_hash.h) and
// also remembers its own tokens, which a lookup compares: a 64-bit key
// collision can then only alias two blocks with identical tokens whose
// parents collide, never hand out KV of different tokens at the same place.
// While some sequence references a cached block it is "in use"; when the
// last reference goes, BlockAllocator parks it here instead of freeing it.
// Parked blocks are the LRU: reused by a later lookup (unparked), or
// evicted oldest first when the allocator runs out of empty blocks.
//
// Not thread-safe: owned by BlockAllocator, i.e. the engine thread.
#ifndef PDSERVE_COMMON_ENGINE_PREFIX_CACHE_H_
#define PDSERVE_COMMON_ENGINE_PREFIX_CACHE_H_

#include <cstdint>
#include <list>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace pdserve {

class PrefixCache {
 public:
  explicit PrefixCache(int32_t num_blocks);

  // The block cached under `key` holding exactly `tokens`, or -1.
  int32_t Find(uint64_t key, absl::Span<const int32_t> tokens) const;
  // Records that `block` holds `tokens` under `key`. Returns false and
  // changes nothing when the key is already cached (in another block: the
  // first copy stays the shared one) or the block already holds a key.
  bool Insert(uint64_t key, absl::Span<const int32_t> tokens, int32_t block);
  bool Contains(int32_t block) const { return entries_[block].cached; }
  bool IsParked(int32_t block) const { return entries_[block].parked; }

  // A cached block lost its last reference: it becomes the most recently
  // used evictable block.
  void Park(int32_t block);
  // A parked block is referenced again.
  void Unpark(int32_t block);
  // Forgets the least recently parked block and returns it (-1 if none).
  int32_t EvictOldest();

  // Keys of at most `max` cached blocks, most recently used first: blocks
  // in use (in block order), then parked ones, newest first. O(blocks):
  // callers recompute it only when version() moved.
  std::vector<uint64_t> RecentKeys(int32_t max) const;
  // Moves on every change of the cached keys or of their order of use.
  uint64_t version() const { return version_; }

  int32_t num_cached() const { return static_cast<int32_t>(by_key_.size()); }
  int32_t num_parked() const { return static_cast<int32_t>(lru_.size()); }

 private:
  struct Entry {
    bool cached = false;
    bool parked = false;
    uint64_t key = 0;
    std::vector<int32_t> tokens;
    std::list<int32_t>::iterator lru_pos;
  };

  std::vector<Entry> entries_;  // by block id
  absl::flat_hash_map<uint64_t, int32_t> by_key_;
  std::list<int32_t> lru_;  // parked blocks, least recently parked first
  uint64_t version_ = 0;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_PREFIX_CACHE_H_
