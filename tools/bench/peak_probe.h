// This CPU's arithmetic peaks, measured: the int8 dot-product instruction
// the kernels use (vpdpbusd on zmm or ymm, or AVX2's maddubs + madd) and
// the f32 FMA, on 1 thread and on every thread of a pool, each as a loop of
// independent accumulators. docs/PERFORMANCE.md reports the matmuls as a
// share of these (`pdserve bench-engine --bench_peak`).
#ifndef PDSERVE_TOOLS_BENCH_PEAK_PROBE_H_
#define PDSERVE_TOOLS_BENCH_PEAK_PROBE_H_

#include <optional>
#include <string>
#include <vector>

#include "common/base/thread_pool.h"
#include "common/quant/packed_gemm.h"

namespace pdserve {

struct Peak {
  std::string what;         // e.g. "int8 MAC, vpdpbusd zmm"
  bool int8;                // MACs (else f32 FMAs)
  // Set on the int8 probes in llama.cpp's one-token order (a bound, not a
  // peak): the kernels whose per-slice convert and FMA it prices.
  std::optional<PackedVariant> order_of;
  double per_s_1thread;     // operations per second
  double per_s_all;         // on all pool threads at once
};

// Every probe this CPU runs (the best int8 form first). The llama-order
// probes bound the exact kernels of their variant: what a per-slice convert
// and FMA leave of the int8 peak on this CPU.
std::vector<Peak> MeasurePeaks(ThreadPool* pool);

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_PEAK_PROBE_H_
