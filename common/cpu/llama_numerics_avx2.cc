// The AVX2 copy of llama_numerics.h's kernels (see llama_numerics_simd.inc):
// a 16-lane value is two __m256 (lanes 0-7, 8-15), and each AVX512 step of
// ggml's AVX512 build is rebuilt from AVX2 steps that give the same bits:
// lane-wise arithmetic is the same IEEE operation on half the lanes, the
// 512-bit reduction starts with (upper + lower half) as GCC expands it, and
// scalef becomes two exact power-of-two multiplies (below). Compiled with
// -mavx2 -mfma -mf16c -ffp-contract=off and only reached after
// ActiveLlamaNumericsIsa() checked the CPU.
#include <immintrin.h>
#include <math.h>

#include <cstdint>

#include "common/cpu/llama_numerics.h"

namespace pdserve::llama_numerics_avx2 {
namespace {

// A 16-lane value takes two of the 16 registers: V sums of 2 rows x 2
// chunks, with the 2 chunks of V, fit.
constexpr int kGroup = 2;
constexpr int kChunks = 2;
// V passes over 256 positions keep their rows in cache across the 64
// slots (measured ~10% faster for decode at 2k context than one pass).
constexpr int kValueWindow = 256;

struct V {
  __m256 lo, hi;
};

V Zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
V Set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
V Load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
void Store(float* p, V x) {
  _mm256_storeu_ps(p, x.lo);
  _mm256_storeu_ps(p + 8, x.hi);
}
V LoadF16(const uint16_t* p) {
  return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
}
V Add(V a, V b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
V Sub(V a, V b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
V Mul(V a, V b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
V Div(V a, V b) { return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)}; }
V Fmadd(V a, V b, V c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}

// The first step of _mm512_reduce_add_ps as GCC 12 expands it.
__m256 FoldHalves(V x) { return _mm256_add_ps(x.hi, x.lo); }

__m256 RoundF16Half(__m256 x) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
V RoundF16(V x) { return {RoundF16Half(x.lo), RoundF16Half(x.hi)}; }



// 2^k for integer k in [-126, 127], exactly.
__m256 PowerOfTwo(__m256i k) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}

// _mm512_scalef_ps(poly, n) for integral n in [-192, 192]: poly * 2^n
// rounded once. 2^n itself may not be a float, so it is applied as
// 2^(n - 96 sign) then 2^(96 sign): the first product stays within
// [2^-97, 2^97] and is exact, the second rounds (or overflows, or becomes
// subnormal) once, as scalef does. Other lanes are saturated by the caller.
__m256 ScaleByPowerOfTwo(__m256 poly, __m256 n) {
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i positive = _mm256_cmpgt_epi32(ni, _mm256_setzero_si256());
  const __m256i outer = _mm256_blendv_epi8(_mm256_set1_epi32(-96), _mm256_set1_epi32(96), positive);
  const __m256 inner = _mm256_mul_ps(poly, PowerOfTwo(_mm256_sub_epi32(ni, outer)));
  return _mm256_mul_ps(inner, PowerOfTwo(outer));
}

V Fnmadd(V a, V b, V c) {
  return {_mm256_fnmadd_ps(a.lo, b.lo, c.lo), _mm256_fnmadd_ps(a.hi, b.hi, c.hi)};
}

// ScaleByPowerOfTwo, with lanes where |n| > 192 saturated as the AVX512
// copy saturates them: 0 when n <= 0, +inf otherwise.
__m256 ScaleSaturatedHalf(__m256 poly, __m256 n) {
  const __m256 res = ScaleByPowerOfTwo(poly, n);
  const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 huge = _mm256_cmp_ps(abs_n, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
  if (_mm256_movemask_ps(huge) == 0) return res;
  const __m256 zero = _mm256_setzero_ps();
  const __m256 non_positive = _mm256_cmp_ps(n, zero, _CMP_LE_OQ);
  const __m256 saturated = _mm256_blendv_ps(_mm256_set1_ps(INFINITY), zero, non_positive);
  return _mm256_blendv_ps(res, saturated, huge);
}

V ScaleSaturated(V poly, V n) {
  return {ScaleSaturatedHalf(poly.lo, n.lo), ScaleSaturatedHalf(poly.hi, n.hi)};
}

}  // namespace

#include "common/cpu/llama_numerics_simd.inc"

}  // namespace pdserve::llama_numerics_avx2
