#include "common/engine/block_allocator.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pdserve {

BlockAllocator::BlockAllocator(int32_t num_blocks)
    : refcounts_(num_blocks, 0), window_released_(num_blocks, false), cache_(num_blocks) {
  empty_.reserve(num_blocks);
  for (int32_t b = num_blocks - 1; b >= 0; --b) empty_.push_back(b);
}

absl::StatusOr<std::vector<int32_t>> BlockAllocator::Allocate(int32_t n) {
  if (n < 0 || n > num_free()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("kv cache: need ", n, " blocks, ", num_free(), " of ", num_blocks(), " free"));
  }
  const int32_t from_empty = std::min<int32_t>(n, static_cast<int32_t>(empty_.size()));
  std::vector<int32_t> out(empty_.end() - from_empty, empty_.end());
  empty_.resize(empty_.size() - from_empty);
  while (static_cast<int32_t>(out.size()) < n) out.push_back(cache_.EvictOldest());
  for (int32_t b : out) {
    refcounts_[b] = 1;
    window_released_[b] = false;
  }
  return out;
}

int32_t BlockAllocator::refcount(int32_t block) const {
  CHECK(block >= 0 && block < num_blocks()) << "kv block id " << block << " out of range";
  return refcounts_[block];
}

void BlockAllocator::Ref(int32_t block) {
  if (refcount(block) == 0) {
    CHECK(cache_.IsParked(block)) << "ref of free kv block " << block;
    cache_.Unpark(block);
  }
  ++refcounts_[block];
}

bool BlockAllocator::Unref(int32_t block) {
  CHECK_GT(refcount(block), 0) << "double free of kv block " << block;
  if (--refcounts_[block] > 0) return false;
  if (cache_.Contains(block)) {
    cache_.Park(block);
  } else {
    empty_.push_back(block);
  }
  return true;
}

void BlockAllocator::UnrefAll(const std::vector<int32_t>& blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) Unref(*it);
}

void BlockAllocator::Publish(int32_t block, uint64_t key, absl::Span<const int32_t> tokens) {
  CHECK_GT(refcount(block), 0) << "publish of unused kv block " << block;
  cache_.Insert(key, tokens, block);
}

}  // namespace pdserve
