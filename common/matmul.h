// Quantised matrix multiplication for the forward pass: y = W x for one or
// more weights that share the same input rows.
//
// The input rows are quantised once per activation type (as llama.cpp does,
// so the integer products match), then the union of all weights' output
// rows is split across the thread pool in groups of four rows that share
// each activation load. One call = one parallel region, so fusing Q/K/V or
// gate/up into one call halves the synchronisation per layer.
//
// Not thread-safe: a Matmul instance owns scratch memory and is used by one
// engine thread.
#ifndef PDSERVE_COMMON_MATMUL_H_
#define PDSERVE_COMMON_MATMUL_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/model_weights.h"
#include "common/thread_pool.h"

namespace pdserve {

struct MatmulJob {
  const WeightMatrix* w;
  float* y;  // [n_tokens][w->out]
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
  };
  const QuantizedInput& Quantize(uint32_t weight_type, const float* x, int64_t in,
                                 int64_t n_tokens);
  void RunRows(absl::Span<const MatmulJob> jobs, int64_t n_tokens, int64_t row_begin,
               int64_t row_end);

  ThreadPool* pool_;
  std::vector<QuantizedInput> inputs_;  // one per activation type in the current Run
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_MATMUL_H_
