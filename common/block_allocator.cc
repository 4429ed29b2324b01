#include "common/block_allocator.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pdserve {

BlockAllocator::BlockAllocator(int32_t num_blocks) : refcounts_(num_blocks, 0) {
  free_.reserve(num_blocks);
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

absl::StatusOr<std::vector<int32_t>> BlockAllocator::Allocate(int32_t n) {
  if (n < 0 || n > num_free()) {
    return absl::ResourceExhaustedError(absl::StrCat("kv cache: need ", n, " blocks, ",
                                                     num_free(), " of ", num_blocks(), " free"));
  }
  std::vector<int32_t> out(free_.end() - n, free_.end());
  free_.resize(free_.size() - n);
  for (int32_t b : out) refcounts_[b] = 1;
  return out;
}

int32_t BlockAllocator::refcount(int32_t block) const {
  CHECK(block >= 0 && block < num_blocks()) << "kv block id " << block << " out of range";
  return refcounts_[block];
}

void BlockAllocator::Ref(int32_t block) {
  CHECK_GT(refcount(block), 0) << "ref of free kv block " << block;
  ++refcounts_[block];
}

bool BlockAllocator::Unref(int32_t block) {
  CHECK_GT(refcount(block), 0) << "double free of kv block " << block;
  if (--refcounts_[block] > 0) return false;
  free_.push_back(block);
  return true;
}

void BlockAllocator::UnrefAll(const std::vector<int32_t>& blocks) {
  for (int32_t b : blocks) Unref(b);
}

}  // namespace pdserve
