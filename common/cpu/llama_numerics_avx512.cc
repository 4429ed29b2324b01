// The AVX512F+DQ copy of llama_numerics.h's kernels (see
// llama_numerics_simd.inc): a 16-lane value is one __m512, and every step is
// the instruction ggml's AVX512 build executes. Compiled with
// -mavx512f -mavx512dq -mfma -mf16c -ffp-contract=off and only reached after
// ActiveLlamaNumericsIsa() checked the CPU.
#include <immintrin.h>
#include <math.h>

#include <cstdint>

#include "common/cpu/llama_numerics.h"

namespace pdserve::llama_numerics_avx512 {
namespace {

// V sums of 6 rows x 4 chunks (a 64-wide head) in 24 of the 32 registers.
constexpr int kGroup = 6;
constexpr int kChunks = 4;
// One V pass over the whole context measured best here (2026-12-02).
constexpr int kValueWindow = 1 << 30;

struct V {
  __m512 v;
};

V Zero() { return {_mm512_setzero_ps()}; }
V Set1(float x) { return {_mm512_set1_ps(x)}; }
V Load(const float* p) { return {_mm512_loadu_ps(p)}; }
void Store(float* p, V x) { _mm512_storeu_ps(p, x.v); }
V LoadF16(const uint16_t* p) {
  return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
}
V Add(V a, V b) { return {_mm512_add_ps(a.v, b.v)}; }
V Sub(V a, V b) { return {_mm512_sub_ps(a.v, b.v)}; }
V Mul(V a, V b) { return {_mm512_mul_ps(a.v, b.v)}; }
V Div(V a, V b) { return {_mm512_div_ps(a.v, b.v)}; }
V Fmadd(V a, V b, V c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }

// The first step of _mm512_reduce_add_ps as GCC 12 expands it.
__m256 FoldHalves(V x) {
  return _mm256_add_ps(_mm512_extractf32x8_ps(x.v, 1), _mm512_castps512_ps256(x.v));
}

V RoundF16(V x) {
  return {_mm512_cvtph_ps(_mm512_cvtps_ph(x.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))};
}



V Fnmadd(V a, V b, V c) { return {_mm512_fnmadd_ps(a.v, b.v, c.v)}; }

// poly * 2^n with scalef; lanes with |n| > 192 saturate: 0 when n <= 0,
// +inf otherwise (so exp(-inf) is exactly 0).
V ScaleSaturated(V poly, V n) {
  const __m512 res = _mm512_scalef_ps(poly.v, n.v);
  const __mmask16 huge = _mm512_cmp_ps_mask(_mm512_abs_ps(n.v), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
  if (huge == 0) return {res};
  const __m512 zero = _mm512_setzero_ps();
  const __mmask16 non_positive = _mm512_cmp_ps_mask(n.v, zero, _CMP_LE_OQ);
  const __m512 saturated = _mm512_mask_blend_ps(non_positive, _mm512_set1_ps(INFINITY), zero);
  return {_mm512_mask_blend_ps(huge, res, saturated)};
}

}  // namespace

#include "common/cpu/llama_numerics_simd.inc"

}  // namespace pdserve::llama_numerics_avx512
