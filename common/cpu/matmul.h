// Quantised matrix multiplication for the forward pass: y = W x for one or
// more weights that share the same input rows.
//
// The input rows are quantised once per activation type (as llama.cpp does,
// so the integer products match), then the union of all weights' output
// rows is split across the thread pool in groups of kPackedRows rows. A
// weight with a packed copy (common/cpu/packed_weights.h) whose type has a
// packed kernel on the active ISA goes through that kernel, which computes a
// whole row group per SIMD dot product and reuses it across a tile of
// tokens, with results bit-identical to the row-by-row vec_dot kernels;
// any other weight is dotted row by row. One call = one parallel
// region, so fusing Q/K/V or gate/up into one call halves the
// synchronisation per layer.
//
// Not thread-safe: a Matmul instance owns scratch memory and is used by one
// engine thread.
#ifndef PDSERVE_COMMON_CPU_MATMUL_H_
#define PDSERVE_COMMON_CPU_MATMUL_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/base/thread_pool.h"
#include "common/cpu/packed_weights.h"
#include "common/model/model_weights.h"
#include "common/quant/kernels.h"

namespace pdserve {

struct MatmulJob {
  const WeightMatrix* w;
  float* y;  // [n_tokens][w->out]
  // Optional packed copy of *w (may be null or empty).
  const PackedMatrix* packed = nullptr;
};

class Matmul {
 public:
  explicit Matmul(ThreadPool* pool) : pool_(pool) {}

  // All jobs must have the same `in`; x is [n_tokens][in].
  void Run(absl::Span<const MatmulJob> jobs, const float* x, int64_t n_tokens);

 private:
  struct QuantizedInput {
    uint32_t weight_type = 0;
    int64_t row_bytes = 0;
    std::vector<uint8_t> data;
    // Per-block scalars for the packed kernels (see PackedGemmArgs).
    std::vector<float> d, s;
    std::vector<int32_t> offsets;
  };
  // How one job is computed in the current Run.
  struct Plan {
    const MatmulJob* job;
    const TypeKernels* kernels;
    const QuantizedInput* input;
    bool packed;
    int64_t first_unit;  // in units of kPackedRows rows over all jobs
    int64_t units;
  };
  QuantizedInput& Quantize(uint32_t weight_type, const float* x, int64_t in, int64_t n_tokens);
  void RunUnits(int64_t n_tokens, int64_t unit_begin, int64_t unit_end) const;
  void RunPacked(const Plan& p, int64_t n_tokens, int64_t lo, int64_t hi) const;
  void RunRows(const Plan& p, int64_t n_tokens, int64_t row_begin, int64_t row_end) const;

  ThreadPool* pool_;
  std::vector<QuantizedInput> inputs_;  // one per activation type in the current Run
  std::vector<Plan> plans_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_CPU_MATMUL_H_
