// PackedMatrix: a copy of a weight matrix re-laid out at load time for the
// row-interleaved SIMD kernels (layouts in common/quant/packed_layout.h), so
// that a matmul computes kPackedRows output rows per integer dot product.
// The values are unchanged, only their order in memory, so the kernels keep
// the one-token kernels' integer sums and float order, bit for bit. The
// packed copy serves prefill and decode alike; the source pages are given
// back to the kernel, so a model is held once.
// PackedModelWeights: the packed copies of every matrix the forward pass
// multiplies by.
//
// Both own their buffers and are immutable after Pack(); safe to share
// across threads.
#ifndef PDSERVE_COMMON_CPU_PACKED_WEIGHTS_H_
#define PDSERVE_COMMON_CPU_PACKED_WEIGHTS_H_

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

#include "common/model/model_weights.h"

namespace pdserve {

class PackedMatrix {
 public:
  // True for the weight types that have a packed layout (Q4_1, Q8_0, Q5_0,
  // Q4_K, Q6_K).
  static bool HasLayout(uint32_t type);
  // Called while packing with the end of the prefix of `w`'s bytes that
  // packing is done with (it grows), so a caller can let them go.
  using SourceDoneFn = std::function<void(const uint8_t* done_until)>;
  // Packs `w`; returns an empty matrix when its type has no packed layout.
  static PackedMatrix Pack(const WeightMatrix& w, const SourceDoneFn& source_done = {});

  bool empty() const { return data_ == nullptr; }
  uint32_t type() const { return type_; }
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t n_groups() const { return n_groups_; }
  int64_t bytes() const { return n_groups_ * group_bytes_; }
  // Start of row group g (rows [g * kPackedRows, (g + 1) * kPackedRows)).
  const uint8_t* group(int64_t g) const { return data_.get() + g * group_bytes_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  uint32_t type_ = 0;
  int64_t in_ = 0;
  int64_t out_ = 0;
  int64_t n_blocks_ = 0;
  int64_t n_groups_ = 0;
  int64_t group_bytes_ = 0;
  std::unique_ptr<uint8_t, Free> data_;
};

struct PackedLayerWeights {
  PackedMatrix wq, wk, wv, wo;
  PackedMatrix w_gate, w_up, w_down;
};

struct PackedModelWeights {
  std::vector<PackedLayerWeights> layers;
  PackedMatrix output;

  // Packs the matrices whose type has a packed kernel on the active ISA;
  // the others stay empty (Matmul then reads the original rows).
  static PackedModelWeights Pack(const ModelWeights& weights);
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_CPU_PACKED_WEIGHTS_H_
