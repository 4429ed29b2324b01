// Matmul throughput per weight type on model-shaped random matrices,
// through the engine's Matmul (activation quantisation included) on the
// active kernels: G MAC/s at a prompt's token count, a decode step's and a
// speculative step's (`pdserve bench-engine --bench_peak`).
#ifndef PDSERVE_TOOLS_BENCH_KERNEL_BENCH_H_
#define PDSERVE_TOOLS_BENCH_KERNEL_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/thread_pool.h"

namespace pdserve {

struct KernelRate {
  std::string matrix;  // e.g. "Q5_0 896x4864 (Qwen ffn_gate)"
  int64_t tokens;
  double macs_per_s;
  // Whether the type's one-token order converts and FMAs every 4-element
  // slice (all but Q4_K): what the llama-order probes bound.
  bool slice_order;
};

// Every shape at each of `token_counts`, best of a few runs.
std::vector<KernelRate> MeasureKernels(ThreadPool* pool, const std::vector<int64_t>& token_counts);

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_KERNEL_BENCH_H_
