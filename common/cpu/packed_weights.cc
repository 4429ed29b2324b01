#include "common/cpu/packed_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/gguf/ggml_type.h"
#include "common/quant/kernels.h"
#include "common/quant/packed_layout.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

// Source rows handed back per report while packing: about 4 MiB of a large
// Q8_0 output matrix, so the source and the packed copy of the largest
// matrix are never both resident in full.
constexpr int64_t kGroupsPerReport = 256;

}  // namespace

bool PackedMatrix::HasLayout(uint32_t type) { return PackedLayoutOf(type).block_bytes > 0; }

PackedMatrix PackedMatrix::Pack(const WeightMatrix& w, const SourceDoneFn& source_done) {
  PackedMatrix p;
  const PackedLayout layout = PackedLayoutOf(w.type);
  if (layout.block_bytes == 0 || w.in % layout.block_elems != 0 || w.out <= 0) return p;
  p.type_ = w.type;
  p.in_ = w.in;
  p.out_ = w.out;
  p.n_blocks_ = w.in / layout.block_elems;
  p.n_groups_ = (w.out + kPackedRows - 1) / kPackedRows;
  p.group_bytes_ = p.n_blocks_ * layout.block_bytes;
  const size_t bytes = static_cast<size_t>(p.n_groups_ * p.group_bytes_);
  // 64-byte alignment so that every packed vector is one cache line.
  auto* data = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  CHECK(data != nullptr) << "out of memory packing " << bytes << " bytes";
  std::memset(data, 0, bytes);
  p.data_.reset(data);
  for (int64_t g = 0; g < p.n_groups_; ++g) {
    const uint8_t* rows[kPackedRows];
    for (int r = 0; r < kPackedRows; ++r) {
      const int64_t row = g * kPackedRows + r;
      rows[r] = row < w.out ? w.row(row) : nullptr;
    }
    uint8_t* dst = data + g * p.group_bytes_;
    for (int64_t b = 0; b < p.n_blocks_; ++b) {
      PackBlock(w.type, rows, b, dst + b * layout.block_bytes);
    }
    const bool last = g + 1 == p.n_groups_;
    if (source_done && (last || (g + 1) % kGroupsPerReport == 0)) {
      source_done(w.row(std::min(w.out, (g + 1) * kPackedRows)));
    }
  }
  return p;
}

namespace {

// The forward pass reads the packed copy from now on, so the source pages
// (mmapped from the GGUF) need not stay resident: ask the kernel to reclaim
// them as packing goes, whole pages inside the matrix only (a page shared
// with the next tensor stays). MADV_PAGEOUT never changes contents (file
// pages are re-read on the next touch, e.g. an embedding row; anonymous
// memory without swap simply stays), so it is safe for in-memory GGUF
// buffers too. Best effort.
class SourceReleaser {
 public:
  explicit SourceReleaser(const uint8_t* data)
      : page_(static_cast<uintptr_t>(sysconf(_SC_PAGESIZE))),
        released_((reinterpret_cast<uintptr_t>(data) + page_ - 1) / page_ * page_) {}

  void Done(const uint8_t* end) {
    const uintptr_t to = reinterpret_cast<uintptr_t>(end) / page_ * page_;
    if (to <= released_) return;
    madvise(reinterpret_cast<void*>(released_), to - released_, MADV_PAGEOUT);
    released_ = to;
  }

 private:
  uintptr_t page_;
  uintptr_t released_;
};

}  // namespace

PackedModelWeights PackedModelWeights::Pack(const ModelWeights& weights) {
  auto pack = [](const WeightMatrix& w) {
    const TypeKernels* k = FindTypeKernels(w.type);
    if (k == nullptr || k->packed_gemm == nullptr) return PackedMatrix();
    SourceReleaser releaser(w.data);
    return PackedMatrix::Pack(w, [&](const uint8_t* end) { releaser.Done(end); });
  };
  PackedModelWeights p;
  p.layers.reserve(weights.layers.size());
  for (const LayerWeights& l : weights.layers) {
    PackedLayerWeights& pl = p.layers.emplace_back();
    pl.wq = pack(l.wq);
    pl.wk = pack(l.wk);
    pl.wv = pack(l.wv);
    pl.wo = pack(l.wo);
    pl.w_gate = pack(l.w_gate);
    pl.w_up = pack(l.w_up);
    pl.w_down = pack(l.w_down);
  }
  p.output = pack(weights.output);
  return p;
}

}  // namespace pdserve
