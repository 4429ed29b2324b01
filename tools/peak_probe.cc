#include "tools/peak_probe.h"

#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "common/quant/kernels.h"
#include "common/quant/packed_gemm.h"

namespace pdserve {
namespace {

// Independent accumulators per loop: enough to cover the latency (4-5
// cycles) of two issues per cycle.
constexpr int kAccs = 12;
constexpr int64_t kIters = 1 << 22;

// Each loop returns operations done; the empty asm keeps every accumulator
// live and opaque, so nothing is folded away.
__attribute__((target("avx512f,avx512vnni"))) int64_t DpbusdZmm() {
  __m512i acc[kAccs];
  for (auto& a : acc) a = _mm512_setzero_si512();
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-5);
  for (int64_t i = 0; i < kIters; ++i) {
    for (auto& a : acc) {
      a = _mm512_dpbusd_epi32(a, u, s);
      asm volatile("" : "+v"(a));
    }
  }
  return kIters * kAccs * 64;
}

__attribute__((target("avx2,avxvnni"))) int64_t DpbusdYmm() {
  __m256i acc[kAccs];
  for (auto& a : acc) a = _mm256_setzero_si256();
  const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-5);
  for (int64_t i = 0; i < kIters; ++i) {
    for (auto& a : acc) {
      a = _mm256_dpbusd_avx_epi32(a, u, s);
      asm volatile("" : "+x"(a));
    }
  }
  return kIters * kAccs * 32;
}

// AVX2's int8 dot: maddubs to int16 pairs, madd to int32, add.
__attribute__((target("avx2"))) int64_t MaddubsYmm() {
  __m256i acc[kAccs];
  for (auto& a : acc) a = _mm256_setzero_si256();
  const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-5), one = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < kIters; ++i) {
    for (auto& a : acc) {
      a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), one));
      asm volatile("" : "+x"(a));
    }
  }
  return kIters * kAccs * 32;
}

__attribute__((target("avx512f"))) int64_t FmaZmm() {
  __m512 acc[kAccs];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-3f);
  for (int64_t i = 0; i < kIters; ++i) {
    for (auto& a : acc) {
      a = _mm512_fmadd_ps(a, x, y);
      asm volatile("" : "+v"(a));
    }
  }
  return kIters * kAccs * 16;
}

__attribute__((target("avx2,fma"))) int64_t FmaYmm() {
  __m256 acc[kAccs];
  for (auto& a : acc) a = _mm256_setzero_ps();
  const __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(1e-3f);
  for (int64_t i = 0; i < kIters; ++i) {
    for (auto& a : acc) {
      a = _mm256_fmadd_ps(a, x, y);
      asm volatile("" : "+x"(a));
    }
  }
  return kIters * kAccs * 8;
}

using Loop = int64_t (*)();

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Operations per second of `loop` on one thread and on all of them (the
// best of three runs each: a VM's neighbours only ever slow a run down).
Peak Measure(const char* what, bool int8, Loop loop, ThreadPool* pool) {
  Peak p{what, int8, 0, 0};
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
    peaks.push_back(Measure("int8 MAC, vpdpbusd zmm", true, DpbusdZmm, pool));
  }
  if (CpuSupportsPackedVariant(PackedVariant::kAvxVnni)) {
    peaks.push_back(Measure("int8 MAC, vpdpbusd ymm (AVX-VNNI)", true, DpbusdYmm, pool));
  }
  if (CpuSupportsAvx2()) {
    peaks.push_back(Measure("int8 MAC, maddubs+madd ymm", true, MaddubsYmm, pool));
  }
  if (CpuSupportsAvx512Vnni()) peaks.push_back(Measure("f32 FMA, zmm", false, FmaZmm, pool));
  if (CpuSupportsAvx2()) peaks.push_back(Measure("f32 FMA, ymm", false, FmaYmm, pool));
  return peaks;
}

}  // namespace pdserve
