#include "tools/bench/peak_probe_loops.h"

#include <immintrin.h>

#include <cstdint>

namespace pdserve::peak_loops {
namespace {

// Twelve independent accumulators: enough to cover a 4-5 cycle latency at
// two issues per cycle. They are named variables (an array stays in memory
// and the loop then measures store forwarding); the empty asm keeps each
// live and opaque, so nothing is folded away.
constexpr int kAccs = 12;
constexpr int64_t kIters = 1 << 22;

#define PDS_ACC12(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11)
#define PDS_DECLARE(k) auto a##k = zero;
#define PDS_STEP(k)  \
  a##k = step(a##k); \
  asm volatile("" : "+v"(a##k));
#define PDS_STEP_READING(k) \
  a##k = step(a##k, p[k]);  \
  asm volatile("" : "+v"(a##k));

template <typename V, typename Step>
inline void Run(V zero, Step step) {
  PDS_ACC12(PDS_DECLARE)
  for (int64_t i = 0; i < kIters; ++i) {
    PDS_ACC12(PDS_STEP)
  }
}

// Run for steps that also take a word from memory, accumulator k the k-th
// of `words` (kAccs of them): the pointer is made opaque every iteration,
// so each step keeps its own load (none is hoisted or carried over in a
// register) and no index arithmetic is added.
template <typename V, typename Step>
inline void RunReading(V zero, const int32_t* words, Step step) {
  PDS_ACC12(PDS_DECLARE)
  for (int64_t i = 0; i < kIters; ++i) {
    const int32_t* p = words;
    asm volatile("" : "+r"(p));
    PDS_ACC12(PDS_STEP_READING)
  }
}

// The llama-order probes' activation words, one per accumulator: they
// differ, so no two steps share a broadcast.
alignas(64) constexpr int32_t kActs[kAccs] = {0x01020304, -0x01020304, 0x7f7f7f7f,  0x10203040,
                                              0x05060708, 0x11223344,  -0x7f000001, 0x0f0f0f0f,
                                              0x01010101, 0x40302010,  0x08070605,  -0x11223344};

#undef PDS_STEP_READING
#undef PDS_STEP
#undef PDS_DECLARE
#undef PDS_ACC12

}  // namespace

int64_t DpbusdZmm() {
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-5);
  Run(_mm512_setzero_si512(), [&](__m512i a) { return _mm512_dpbusd_epi32(a, u, s); });
  return kIters * kAccs * 64;
}

int64_t DpbusdYmm() {
  const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-5);
  Run(_mm256_setzero_si256(), [&](__m256i a) { return _mm256_dpbusd_avx_epi32(a, u, s); });
  return kIters * kAccs * 32;
}

int64_t MaddubsYmm() {
  const __m256i s = _mm256_set1_epi8(-5), one = _mm256_set1_epi16(1);
  // The accumulator is also the unsigned operand: with constant operands
  // the compiler hoists maddubs and madd out of the loop, and the probe
  // then measures vpaddd alone (about twice the real rate).
  Run(_mm256_setzero_si256(), [&](__m256i a) {
    return _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(a, s), one));
  });
  return kIters * kAccs * 32;
}

int64_t LlamaOrderYmm() {
  // One 4-element slice of eight rows per step, as the exact AVX2 kernels
  // do it: the activation's four bytes broadcast from memory, maddubs
  // against the weights, madd into int32, convert, FMA into the slice's own
  // accumulator.
  const __m256i w = _mm256_set1_epi8(13), one = _mm256_set1_epi16(1);
  const __m256 dd = _mm256_set1_ps(1e-9f);
  RunReading(_mm256_setzero_ps(), kActs, [&](__m256 acc, int32_t word) {
    const __m256i sum = _mm256_madd_epi16(_mm256_maddubs_epi16(w, _mm256_set1_epi32(word)), one);
    return _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(sum), acc);
  });
  return kIters * kAccs * 32;
}

int64_t LlamaOrderZmm() {
  // As the AVX-512 kernels do a slice: the int32 sum starts from a
  // broadcast word (their activation slice-sum offset), the activation's
  // four bytes broadcast from memory too.
  const __m512i w = _mm512_set1_epi8(13);
  const __m512 dd = _mm512_set1_ps(1e-9f);
  RunReading(_mm512_setzero_ps(), kActs, [&](__m512 acc, int32_t word) {
    const __m512i a = _mm512_set1_epi32(word);
    return _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(a, w, a)), acc);
  });
  return kIters * kAccs * 64;
}

int64_t LlamaOrderVnniYmm() {
  const __m256i w = _mm256_set1_epi8(13);
  const __m256 dd = _mm256_set1_ps(1e-9f);
  RunReading(_mm256_setzero_ps(), kActs, [&](__m256 acc, int32_t word) {
    const __m256i a = _mm256_set1_epi32(word);
    return _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(_mm256_dpbusd_avx_epi32(a, w, a)), acc);
  });
  return kIters * kAccs * 32;
}

int64_t FmaZmm() {
  const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-3f);
  Run(_mm512_setzero_ps(), [&](__m512 a) { return _mm512_fmadd_ps(a, x, y); });
  return kIters * kAccs * 16;
}

int64_t FmaYmm() {
  const __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(1e-3f);
  Run(_mm256_setzero_ps(), [&](__m256 a) { return _mm256_fmadd_ps(a, x, y); });
  return kIters * kAccs * 8;
}

}  // namespace pdserve::peak_loops
