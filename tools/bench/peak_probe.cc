#include "tools/bench/peak_probe.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

#include "common/quant/kernels.h"
#include "common/quant/packed_gemm.h"
#include "tools/bench/peak_probe_loops.h"

namespace pdserve {
namespace {

using Loop = int64_t (*)();

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Operations per second of `loop` on one thread and on all of them (the
// best of three runs each: a VM's neighbours only ever slow a run down).
Peak Measure(const char* what, bool int8, Loop loop, ThreadPool* pool,
             std::optional<PackedVariant> order_of = std::nullopt) {
  Peak p{what, int8, order_of, 0, 0};
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    const int64_t ops = loop();
    p.per_s_1thread = std::max(p.per_s_1thread, ops / Seconds(t0));
    std::atomic<int64_t> total{0};
    t0 = std::chrono::steady_clock::now();
    pool->ParallelFor(pool->num_threads(), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) total += loop();
    });
    p.per_s_all = std::max(p.per_s_all, total.load() / Seconds(t0));
  }
  return p;
}

}  // namespace

std::vector<Peak> MeasurePeaks(ThreadPool* pool) {
  std::vector<Peak> peaks;
  if (CpuSupportsAvx512Vnni()) {
    peaks.push_back(Measure("int8 MAC, vpdpbusd zmm", true, peak_loops::DpbusdZmm, pool));
    peaks.push_back(Measure("int8 MAC, llama order zmm", true, peak_loops::LlamaOrderZmm, pool,
                            PackedVariant::kAvx512));
  }
  if (CpuSupportsPackedVariant(PackedVariant::kAvxVnni)) {
    peaks.push_back(Measure("int8 MAC, vpdpbusd ymm (AVX-VNNI)", true, peak_loops::DpbusdYmm, pool));
    peaks.push_back(Measure("int8 MAC, llama order ymm (AVX-VNNI)", true,
                            peak_loops::LlamaOrderVnniYmm, pool, PackedVariant::kAvxVnni));
  }
  if (CpuSupportsAvx2()) {
    peaks.push_back(Measure("int8 MAC, maddubs+madd ymm", true, peak_loops::MaddubsYmm, pool));
    peaks.push_back(Measure("int8 MAC, llama order ymm", true, peak_loops::LlamaOrderYmm, pool,
                            PackedVariant::kAvx2));
  }
  if (CpuSupportsAvx512Vnni()) peaks.push_back(Measure("f32 FMA, zmm", false, peak_loops::FmaZmm, pool));
  if (CpuSupportsAvx2()) peaks.push_back(Measure("f32 FMA, ymm", false, peak_loops::FmaYmm, pool));
  return peaks;
}

}  // namespace pdserve
