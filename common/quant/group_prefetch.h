// The next row group's packed weights, fetched ahead a few lines at a time
// by the many-token kernels while they compute this group.
//
// A decode step reads every weight once, from DRAM. Left to the hardware
// prefetchers (which follow a sequential stream within a page, and not the
// strided visits of some kernels' passes), a core computed and then waited
// on memory in turn. Spread over the blocks of a pass, the fetches keep the
// memory busy without stalling the loads the kernel itself waits on (on an
// Intel VM, Q8_0 at 8 tokens: a burst of a whole chunk at once gained
// nothing measurable, spread +14%). Into L2 (T1): into L1 (T0), where they
// queue with the kernel's own misses, they gained half as much.
#ifndef PDSERVE_COMMON_QUANT_GROUP_PREFETCH_H_
#define PDSERVE_COMMON_QUANT_GROUP_PREFETCH_H_

#include <xmmintrin.h>

#include <algorithm>
#include <cstdint>

namespace pdserve {

class GroupPrefetch {
 public:
  // The group after the one at `w` (n_blocks blocks of block_bytes), in
  // `parts` shares, one per pass that fetches. Only the pass that streams
  // this group from memory is `active` (a kernel's first token tile; on
  // AVX2 its first 8-row half): the others find both groups in cache.
  GroupPrefetch(const uint8_t* w, int64_t n_blocks, int64_t block_bytes, bool active, int parts = 1)
      : next_(w + n_blocks * block_bytes),
        n_blocks_(n_blocks),
        lines_((n_blocks * block_bytes + 63) / 64),
        per_block_(active && n_blocks > 0 ? (lines_ + parts * n_blocks - 1) / (parts * n_blocks)
                                          : 0) {}

  // Share `part`'s lines for block `b` of its pass (none when inactive).
  // Past a matrix's end (or a thread's share of it) the lines are only
  // wasted: a prefetch never faults.
  void Fetch(int64_t b, int part = 0) const {
    const int64_t first = (part * n_blocks_ + b) * per_block_;
    const int64_t end = std::min(lines_, first + per_block_);
    for (int64_t line = first; line < end; ++line) {
      _mm_prefetch(reinterpret_cast<const char*>(next_ + 64 * line), _MM_HINT_T1);
    }
  }

 private:
  const uint8_t* next_;
  int64_t n_blocks_;
  int64_t lines_;
  int64_t per_block_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_QUANT_GROUP_PREFETCH_H_
