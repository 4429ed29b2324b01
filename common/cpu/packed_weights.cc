#include "common/cpu/packed_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "common/quant/ggml_type.h"
#include "common/quant/kernels.h"
#include "common/quant/quant_blocks.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

// Bytes of one packed block of kPackedRows rows and the number of 4-byte
// slices of quantised values per row in it.
struct PackedShape {
  int64_t block_bytes;
  int slices;
  int scales;  // f16 scale vectors after the values (d, or d and m)
};

PackedShape ShapeOf(uint32_t type) {
  if (type == static_cast<uint32_t>(GgmlType::kQ4_1)) return {kPackedRows * 20, 4, 2};
  return {kPackedRows * 34, 8, 1};  // Q8_0
}

// Source block fields of one row: quantised bytes and f16 scales.
struct SourceBlock {
  const uint8_t* qs;
  uint16_t scale[2];
};

SourceBlock ReadBlock(uint32_t type, const uint8_t* row, int64_t b) {
  if (type == static_cast<uint32_t>(GgmlType::kQ4_1)) {
    const auto* blk = reinterpret_cast<const BlockQ4_1*>(row) + b;
    return {blk->qs, {blk->d, blk->m}};
  }
  const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
  return {reinterpret_cast<const uint8_t*>(blk->qs), {blk->d, 0}};
}

}  // namespace

bool PackedMatrix::HasLayout(uint32_t type) {
  return type == static_cast<uint32_t>(GgmlType::kQ4_1) ||
         type == static_cast<uint32_t>(GgmlType::kQ8_0);
}

PackedMatrix PackedMatrix::Pack(const WeightMatrix& w) {
  PackedMatrix p;
  if (!HasLayout(w.type) || w.in % kQK != 0 || w.out <= 0) return p;
  const PackedShape shape = ShapeOf(w.type);
  p.type_ = w.type;
  p.in_ = w.in;
  p.out_ = w.out;
  p.n_blocks_ = w.in / kQK;
  p.n_groups_ = (w.out + kPackedRows - 1) / kPackedRows;
  p.group_bytes_ = p.n_blocks_ * shape.block_bytes;
  const size_t bytes = static_cast<size_t>(p.n_groups_ * p.group_bytes_);
  // 64-byte alignment so that every packed vector is one cache line.
  auto* data = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  CHECK(data != nullptr) << "out of memory packing " << bytes << " bytes";
  std::memset(data, 0, bytes);
  p.data_.reset(data);
  const int64_t values_bytes = shape.slices * kPackedRows * 4;
  for (int64_t r = 0; r < w.out; ++r) {
    const int64_t g = r / kPackedRows, lane = r % kPackedRows;
    const uint8_t* src_row = w.row(r);
    uint8_t* dst_group = data + g * p.group_bytes_;
    for (int64_t b = 0; b < p.n_blocks_; ++b) {
      const SourceBlock src = ReadBlock(w.type, src_row, b);
      uint8_t* dst = dst_group + b * shape.block_bytes;
      for (int s = 0; s < shape.slices; ++s) {
        std::memcpy(dst + (s * kPackedRows + lane) * 4, src.qs + 4 * s, 4);
      }
      for (int k = 0; k < shape.scales; ++k) {
        std::memcpy(dst + values_bytes + (k * kPackedRows + lane) * 2, &src.scale[k], 2);
      }
    }
  }
  return p;
}

namespace {

// The forward pass reads the packed copy from now on, so the source pages
// (mmapped from the GGUF) need not stay resident: ask the kernel to reclaim
// them. MADV_PAGEOUT never changes contents (file pages are re-read on the
// next touch, e.g. an embedding row; anonymous memory without swap simply
// stays), so it is safe for in-memory GGUF buffers too. Best effort.
void ReleaseSourcePages(const WeightMatrix& w) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(w.data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(w.data) + w.row_bytes * w.out) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
}

}  // namespace

PackedModelWeights PackedModelWeights::Pack(const ModelWeights& weights) {
  auto pack = [](const WeightMatrix& w) {
    const TypeKernels* k = FindTypeKernels(w.type);
    if (k == nullptr || k->packed_gemm == nullptr) return PackedMatrix();
    PackedMatrix packed = PackedMatrix::Pack(w);
    ReleaseSourcePages(w);
    return packed;
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
