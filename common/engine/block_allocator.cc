#include "common/engine/block_allocator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pdserve {

BlockAllocator::BlockAllocator(int32_t num_ids, int32_t budget_blocks, int64_t block_bytes)
    : budget_blocks_(budget_blocks),
      block_bytes_(block_bytes),
      budget_bytes_(int64_t{budget_blocks} * block_bytes),
      refcounts_(num_ids, 0),
      window_released_(num_ids, false),
      charge_(num_ids, 0),
      cache_(num_ids) {
  CHECK_GE(num_ids, budget_blocks) << "kv pool: fewer block ids than its budget";
  CHECK_GT(block_bytes, 0);
  empty_.reserve(num_ids);
  for (int32_t b = num_ids - 1; b >= 0; --b) empty_.push_back(b);
}

int32_t BlockAllocator::num_free() const {
  const int64_t ids = static_cast<int64_t>(empty_.size()) + cache_.num_parked();
  const int64_t room = (budget_bytes_ - (charged_ - parked_charge_)) / block_bytes_;
  return static_cast<int32_t>(std::max<int64_t>(0, std::min(ids, room)));
}

void BlockAllocator::Uncharge(int32_t block) {
  charged_ -= charge_[block];
  charge_[block] = 0;
}

void BlockAllocator::EvictOne() {
  const int32_t b = cache_.EvictOldest();
  CHECK_GE(b, 0) << "kv pool: nothing parked to evict";
  parked_charge_ -= charge_[b];
  Uncharge(b);
  empty_.push_back(b);
  if (release_) dirty_.push_back(b);
}

absl::StatusOr<std::vector<int32_t>> BlockAllocator::Allocate(int32_t n) {
  if (n < 0 || n > num_free()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("kv cache: need ", n, " blocks, ", num_free(), " of ", num_blocks(), " free"));
  }
  // Room in the budget first (parked blocks are given up, oldest first),
  // then ids: empty ones, then more parked ones.
  while (budget_bytes_ - charged_ < int64_t{n} * block_bytes_) EvictOne();
  while (static_cast<int32_t>(empty_.size()) < n) EvictOne();
  std::vector<int32_t> out(empty_.end() - n, empty_.end());
  empty_.resize(empty_.size() - n);
  for (int32_t b : out) {
    refcounts_[b] = 1;
    window_released_[b] = false;
    charge_[b] = block_bytes_;
    charged_ += block_bytes_;
  }
  ReleaseDirty();
  return out;
}

void BlockAllocator::ReleaseDirty() {
  if (dirty_.empty()) return;
  // Those still empty; the ones just reused are in use again.
  dirty_.erase(std::remove_if(dirty_.begin(), dirty_.end(),
                              [this](int32_t b) { return refcounts_[b] != 0; }),
               dirty_.end());
  if (!dirty_.empty()) release_(dirty_);
  dirty_.clear();
}

void BlockAllocator::MarkWindowReleased(int32_t block, int64_t released_bytes) {
  CHECK_GT(refcount(block), 0) << "window release of unused kv block " << block;
  if (window_released_[block]) return;
  window_released_[block] = true;
  const int64_t refund = std::clamp<int64_t>(released_bytes, 0, charge_[block]);
  charge_[block] -= refund;
  charged_ -= refund;
}

int32_t BlockAllocator::refcount(int32_t block) const {
  CHECK(block >= 0 && block < num_ids()) << "kv block id " << block << " out of range";
  return refcounts_[block];
}

void BlockAllocator::Ref(int32_t block) {
  if (refcount(block) == 0) {
    CHECK(cache_.IsParked(block)) << "ref of free kv block " << block;
    cache_.Unpark(block);
    parked_charge_ -= charge_[block];
  }
  ++refcounts_[block];
}

bool BlockAllocator::Unref(int32_t block) {
  CHECK_GT(refcount(block), 0) << "double free of kv block " << block;
  if (--refcounts_[block] > 0) return false;
  if (cache_.Contains(block)) {
    // Still holds its KV (and its charge) until evicted.
    cache_.Park(block);
    parked_charge_ += charge_[block];
  } else {
    Uncharge(block);
    empty_.push_back(block);
    if (release_) dirty_.push_back(block);
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
