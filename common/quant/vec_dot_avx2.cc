// AVX2 + FMA + F16C kernels. This file is compiled with -mavx2 -mfma -mf16c
// and its functions are only reached after kernel_dispatch.cc has checked
// the CPU, so nothing here may run on an older machine by accident.
//
// The integer parts (maddubs on unsigned x signed bytes) are exact; only
// the float accumulation order differs from the scalar reference.
#include <immintrin.h>

#include <cmath>

#include "common/half.h"
#include "common/quant/kernels.h"
#include "common/quant/quant_blocks.h"

namespace pdserve::kernels_avx2 {
namespace {

inline float Hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  lo = _mm_add_ps(lo, _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

inline int HsumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// 16 packed bytes -> 32 bytes: low nibbles first, then high nibbles.
inline __m256i Nibbles32(const uint8_t* qs) {
  const __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(tmp, 4), tmp);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Sum of products of unsigned bytes `ux` and signed bytes `sy`, as 8 floats.
inline __m256 MulSumUs8(__m256i ux, __m256i sy) {
  const __m256i dot16 = _mm256_maddubs_epi16(ux, sy);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(dot16, _mm256_set1_epi16(1)));
}

// Signed x signed via the sign trick: |x| * (y * sign(x)).
inline __m256 MulSumI8(__m256i x, __m256i y) {
  return MulSumUs8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

inline __m256i Load32(const int8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

float DotQ4_1Q8_1(int64_t n, const void* w, const void* a) {
  const BlockQ4_1* x = static_cast<const BlockQ4_1*>(w);
  const BlockQ8_1* y = static_cast<const BlockQ8_1*>(a);
  __m256 acc = _mm256_setzero_ps();
  float summs = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    summs += F16ToF32(x[i].m) * F16ToF32(y[i].s);
    const __m256 d = _mm256_set1_ps(F16ToF32(x[i].d) * F16ToF32(y[i].d));
    acc = _mm256_fmadd_ps(d, MulSumUs8(Nibbles32(x[i].qs), Load32(y[i].qs)), acc);
  }
  return Hsum(acc) + summs;
}

void Dot4Q4_1Q8_1(int64_t n, const void* w, int64_t stride, const void* a, float* out) {
  const BlockQ4_1* x[4];
  for (int r = 0; r < 4; ++r) {
    x[r] = reinterpret_cast<const BlockQ4_1*>(static_cast<const uint8_t*>(w) + r * stride);
  }
  const BlockQ8_1* y = static_cast<const BlockQ8_1*>(a);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  float summs[4] = {0, 0, 0, 0};
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i qy = Load32(y[i].qs);
    const float dy = F16ToF32(y[i].d), sy = F16ToF32(y[i].s);
    for (int r = 0; r < 4; ++r) {
      summs[r] += F16ToF32(x[r][i].m) * sy;
      const __m256 d = _mm256_set1_ps(F16ToF32(x[r][i].d) * dy);
      acc[r] = _mm256_fmadd_ps(d, MulSumUs8(Nibbles32(x[r][i].qs), qy), acc[r]);
    }
  }
  for (int r = 0; r < 4; ++r) out[r] = Hsum(acc[r]) + summs[r];
}

float DotQ8_0Q8_0(int64_t n, const void* w, const void* a) {
  const BlockQ8_0* x = static_cast<const BlockQ8_0*>(w);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256 d = _mm256_set1_ps(F16ToF32(x[i].d) * F16ToF32(y[i].d));
    acc = _mm256_fmadd_ps(d, MulSumI8(Load32(x[i].qs), Load32(y[i].qs)), acc);
  }
  return Hsum(acc);
}

void Dot4Q8_0Q8_0(int64_t n, const void* w, int64_t stride, const void* a, float* out) {
  const BlockQ8_0* x[4];
  for (int r = 0; r < 4; ++r) {
    x[r] = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(w) + r * stride);
  }
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i qy = Load32(y[i].qs);
    const float dy = F16ToF32(y[i].d);
    for (int r = 0; r < 4; ++r) {
      const __m256 d = _mm256_set1_ps(F16ToF32(x[r][i].d) * dy);
      acc[r] = _mm256_fmadd_ps(d, MulSumI8(Load32(x[r][i].qs), qy), acc[r]);
    }
  }
  for (int r = 0; r < 4; ++r) out[r] = Hsum(acc[r]);
}

float DotQ4_0Q8_0(int64_t n, const void* w, const void* a) {
  const BlockQ4_0* x = static_cast<const BlockQ4_0*>(w);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
  __m256 acc = _mm256_setzero_ps();
  const __m256i eight = _mm256_set1_epi8(8);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256 d = _mm256_set1_ps(F16ToF32(x[i].d) * F16ToF32(y[i].d));
    const __m256i qx = _mm256_sub_epi8(Nibbles32(x[i].qs), eight);
    acc = _mm256_fmadd_ps(d, MulSumI8(qx, Load32(y[i].qs)), acc);
  }
  return Hsum(acc);
}

float DotF16(int64_t n, const void* w, const void* a) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  const uint16_t* y = static_cast<const uint16_t*>(a);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vx = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256 vy = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    acc = _mm256_fmadd_ps(vx, vy, acc);
  }
  float s = Hsum(acc);
  for (; i < n; ++i) s += F16ToF32(x[i]) * F16ToF32(y[i]);
  return s;
}

float DotF32(int64_t n, const void* w, const void* a) {
  const float* x = static_cast<const float*>(w);
  const float* y = static_cast<const float*>(a);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc);
  }
  float s = Hsum(acc);
  for (; i < n; ++i) s += x[i] * y[i];
  return s;
}

// Quantises one 32-block exactly as the scalar QuantizeBlock32 does
// (127/amax scale, round half to even) and returns the sum of the ints.
inline int QuantizeBlock32(const float* x, int8_t* qs, float* d_out) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_loadu_ps(x + 8 * k);
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, v[k]));
  }
  __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(amax, 1), _mm256_castps256_ps128(amax));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float max_scalar = _mm_cvtss_f32(m4);
  *d_out = max_scalar / 127.0f;
  const __m256 mul = _mm256_set1_ps(max_scalar != 0.0f ? 127.0f / max_scalar : 0.0f);
  __m256i i32[4];
  for (int k = 0; k < 4; ++k) {
    const __m256 r = _mm256_round_ps(_mm256_mul_ps(v[k], mul), _MM_ROUND_NEAREST);
    i32[k] = _mm256_cvtps_epi32(r);
  }
  const int sum = HsumI32(_mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]),
                                           _mm256_add_epi32(i32[2], i32[3])));
  __m256i p01 = _mm256_packs_epi32(i32[0], i32[1]);
  __m256i p23 = _mm256_packs_epi32(i32[2], i32[3]);
  __m256i p = _mm256_packs_epi16(p01, p23);
  // Undo the lane interleave of the two packs.
  p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), p);
  return sum;
}

void QuantizeRowQ8_0(const float* x, void* dst, int64_t n) {
  BlockQ8_0* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float d;
    QuantizeBlock32(x, y[i].qs, &d);
    y[i].d = F32ToF16(d);
  }
}

void QuantizeRowQ8_1(const float* x, void* dst, int64_t n) {
  BlockQ8_1* y = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float d;
    const int sum = QuantizeBlock32(x, y[i].qs, &d);
    y[i].d = F32ToF16(d);
    y[i].s = F32ToF16(d * static_cast<float>(sum));
  }
}

float AttnDotF16(const uint16_t* k, const float* q, int n) {
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vk = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + i)));
    acc = _mm256_fmadd_ps(vk, _mm256_loadu_ps(q + i), acc);
  }
  float s = Hsum(acc);
  for (; i < n; ++i) s += F16ToF32(k[i]) * q[i];
  return s;
}

void AttnAxpyF16(float a, const uint16_t* v, float* acc, int n) {
  const __m256 va = _mm256_set1_ps(a);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i)));
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(va, vv, _mm256_loadu_ps(acc + i)));
  }
  for (; i < n; ++i) acc[i] += a * F16ToF32(v[i]);
}

void AttnToF16(const float* src, uint16_t* dst, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = F32ToF16(src[i]);
}

}  // namespace

const AttentionKernels kAttention = {AttnDotF16, AttnAxpyF16, AttnToF16};

TypeKernels Upgrade(const TypeKernels& k) {
  TypeKernels out = k;
  switch (k.weight_type) {
    case GgmlType::kQ4_1:
      out.quantize_act = QuantizeRowQ8_1;
      out.vec_dot = DotQ4_1Q8_1;
      out.vec_dot4 = Dot4Q4_1Q8_1;
      break;
    case GgmlType::kQ8_0:
      out.quantize_act = QuantizeRowQ8_0;
      out.vec_dot = DotQ8_0Q8_0;
      out.vec_dot4 = Dot4Q8_0Q8_0;
      break;
    case GgmlType::kQ4_0:
      out.quantize_act = QuantizeRowQ8_0;
      out.vec_dot = DotQ4_0Q8_0;
      break;
    case GgmlType::kF16:
      out.vec_dot = DotF16;
      break;
    case GgmlType::kF32:
      out.vec_dot = DotF32;
      break;
    default:
      break;
  }
  return out;
}

}  // namespace pdserve::kernels_avx2
