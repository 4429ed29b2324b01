// AVX512F+DQ kernels behind llama_numerics.h. Compiled with
// -mavx512f -mavx512dq -mfma -mf16c -ffp-contract=off and only reached after
// LlamaExactNumericsActive() checked the CPU.
//
// Each step performs the operation ggml's CPU backend (llama.cpp 0.3.7,
// ggml-cpu.c, AVX512 build) performs, in the same association order:
// - exp: the ARM optimized-routines approximation ggml_v_expf uses, 16 lanes.
// - f16 dot products (ggml_vec_dot_f16): 64 elements per step in four
//   16-lane FMA accumulators, folded (a0 + a2) + (a1 + a3), reduced with
//   _mm512_reduce_add_ps, then the n % 64 leftovers added one by one in
//   double.
// - softmax (ggml_vec_soft_max_f32): exp over 16-lane chunks, each chunk's
//   _mm512_reduce_add_ps added to a double sum; probabilities times
//   (float)(1 / sum).
// llama.cpp pads the KV length to a multiple of 32 and masks the padding
// with -inf. Masked probabilities are exactly 0, so padded positions add
// nothing here and are skipped; the padded length still decides which
// positions fall in the 64-wide FMA part of P.V and which are leftovers.
//
// Only intrinsics and C functions are used: an inline function from a C++
// header compiled with these flags could become the copy the linker keeps.
#include <immintrin.h>
#include <math.h>

#include <cstdint>

#include "common/llama_numerics.h"

namespace pdserve::llama_numerics_avx512 {
namespace {

constexpr int kLanes = 16;
constexpr int kAccs = 4;               // GGML_F16_ARR
constexpr int kStep = kAccs * kLanes;  // GGML_F16_STEP
constexpr int kKvPad = 32;             // llama.cpp's n_kv padding (no flash attention)

// exp(x) = 2^n * exp(b), n = round(x / ln2) through the 1.5 * 2^23 shift,
// b = x - n ln2 with ln2 in two parts, exp(b) by a degree-5 polynomial, and
// 2^n applied with scalef. Lanes with |n| > 192 saturate: 0 when n <= 0,
// +inf otherwise (so exp(-inf) is exactly 0).
__m512 Exp(__m512 x) {
  const __m512 shift = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shift);
  const __m512 n = _mm512_sub_ps(z, shift);
  const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                    _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __mmask16 huge = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 hi =
      _mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f));
  const __m512 mid =
      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f));
  const __m512 lo = _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f));
  const __m512 poly = _mm512_fmadd_ps(_mm512_fmadd_ps(hi, u, mid), u, lo);
  const __m512 res = _mm512_scalef_ps(poly, n);
  if (huge == 0) return res;
  const __m512 zero = _mm512_setzero_ps();
  const __mmask16 non_positive = _mm512_cmp_ps_mask(n, zero, _CMP_LE_OQ);
  const __m512 saturated = _mm512_mask_blend_ps(non_positive, _mm512_set1_ps(INFINITY), zero);
  return _mm512_mask_blend_ps(huge, res, saturated);
}

__m512 LoadF16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

float F16ToF32(uint16_t h) { return _cvtsh_ss(h); }

// GGML_F32x16_REDUCE over four accumulators.
float FoldAndReduce(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  a0 = _mm512_add_ps(a0, a2);
  a1 = _mm512_add_ps(a1, a3);
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

// ggml_vec_dot_f16(n, x, y) with y already widened to f32 (exact).
float DotF16(const uint16_t* x, const float* y, int n) {
  const int np = n & ~(kStep - 1);
  __m512 acc[kAccs] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                       _mm512_setzero_ps()};
  for (int i = 0; i < np; i += kStep) {
    for (int a = 0; a < kAccs; ++a) {
      const int o = i + a * kLanes;
      acc[a] = _mm512_fmadd_ps(LoadF16(x + o), _mm512_loadu_ps(y + o), acc[a]);
    }
  }
  double sum = FoldAndReduce(acc[0], acc[1], acc[2], acc[3]);
  for (int i = np; i < n; ++i) sum += static_cast<double>(F16ToF32(x[i]) * y[i]);
  return static_cast<float>(sum);
}

// Calls fn(j, k_row, v_row) for positions [begin, end) in order.
template <typename Fn>
void ForEachRow(const KvHeadRows& kv, int begin, int end, Fn fn) {
  int j = begin;
  while (j < end) {
    const int block = j / kv.block_size;
    const int stop = (block + 1) * kv.block_size < end ? (block + 1) * kv.block_size : end;
    const uint16_t* k = kv.base + kv.block_table[block] * kv.block_stride +
                        static_cast<int64_t>(j % kv.block_size) * kv.row_stride;
    for (; j < stop; ++j, k += kv.row_stride) fn(j, k, k + kv.v_offset);
  }
}

// scores[j] = (q . k_j) * scale for j < n_ctx; returns their maximum.
float Scores(const float* q, int dh, float scale, int n_ctx, const KvHeadRows& kv, float* scores) {
  float max = -INFINITY;
  ForEachRow(kv, 0, n_ctx, [&](int j, const uint16_t* k, const uint16_t*) {
    scores[j] = DotF16(k, q, dh) * scale;
    max = max > scores[j] ? max : scores[j];
  });
  return max;
}

// Turns scores[0, n_ctx) into f16-rounded probabilities (as f32), exactly as
// ggml_compute_forward_soft_max_f32 followed by the f32 -> f16 conversion of
// the P.V matmul's second operand.
void Softmax(float* scores, int n_ctx, float max) {
  const __m512 vmax = _mm512_set1_ps(max);
  double sum = 0.0;
  for (int i = 0; i < n_ctx; i += kLanes) {
    const __mmask16 live = n_ctx - i >= kLanes ? 0xFFFF : (1u << (n_ctx - i)) - 1;
    const __m512 x = _mm512_maskz_loadu_ps(live, scores + i);
    const __m512 e = _mm512_maskz_mov_ps(live, Exp(_mm512_sub_ps(x, vmax)));
    _mm512_mask_storeu_ps(scores + i, live, e);
    sum += static_cast<double>(_mm512_reduce_add_ps(e));
  }
  const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / sum));
  for (int i = 0; i < n_ctx; i += kLanes) {
    const __mmask16 live = n_ctx - i >= kLanes ? 0xFFFF : (1u << (n_ctx - i)) - 1;
    const __m512 p = _mm512_mul_ps(_mm512_maskz_loadu_ps(live, scores + i), inv);
    const __m256i h = _mm512_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm512_mask_storeu_ps(scores + i, live, _mm512_cvtph_ps(h));
  }
}

// out[d] = ggml_vec_dot_f16 over the padded positions of V[.][d] and p.
// Position j's product goes to lane j % 16 of accumulator (j / 16) % 4; acc
// keeps those 4 x 16 lanes for every d, laid out [accumulator][lane][d] so
// that each position updates one contiguous row.
void WeightedValues(const float* p, int dh, int n_ctx, const KvHeadRows& kv, float* acc,
                    float* out) {
  const int n_pad = (n_ctx + kKvPad - 1) / kKvPad * kKvPad;
  const int np = n_pad & ~(kStep - 1);
  const int n_fma = np < n_ctx ? np : n_ctx;
  double sum[512];
  if (np > 0) {
    for (int i = 0; i < kStep * dh; i += kLanes) _mm512_storeu_ps(acc + i, _mm512_setzero_ps());
    ForEachRow(kv, 0, n_fma, [&](int j, const uint16_t*, const uint16_t* v) {
      float* row = acc + static_cast<int64_t>(j % kStep) * dh;
      const __m512 pj = _mm512_set1_ps(p[j]);
      for (int d = 0; d < dh; d += kLanes) {
        _mm512_storeu_ps(row + d, _mm512_fmadd_ps(LoadF16(v + d), pj, _mm512_loadu_ps(row + d)));
      }
    });
    // The accumulator fold, then _mm512_reduce_add_ps's tree across lanes
    // (l + l+8, then + l+4, then + l+2, then + l+1), for 16 values of d at a time.
    for (int d = 0; d < dh; d += kLanes) {
      __m512 lane[kLanes];
      for (int l = 0; l < kLanes; ++l) {
        const float* r = acc + static_cast<int64_t>(l) * dh + d;
        const int64_t a = static_cast<int64_t>(kLanes) * dh;  // one accumulator
        const __m512 a02 = _mm512_add_ps(_mm512_loadu_ps(r), _mm512_loadu_ps(r + 2 * a));
        const __m512 a13 = _mm512_add_ps(_mm512_loadu_ps(r + a), _mm512_loadu_ps(r + 3 * a));
        lane[l] = _mm512_add_ps(a02, a13);
      }
      for (int width = kLanes / 2; width >= 1; width /= 2) {
        for (int l = 0; l < width; ++l) lane[l] = _mm512_add_ps(lane[l + width], lane[l]);
      }
      _mm512_storeu_pd(sum + d, _mm512_cvtps_pd(_mm512_castps512_ps256(lane[0])));
      _mm512_storeu_pd(sum + d + 8, _mm512_cvtps_pd(_mm512_extractf32x8_ps(lane[0], 1)));
    }
  } else {
    for (int d = 0; d < dh; d += 8) _mm512_storeu_pd(sum + d, _mm512_setzero_pd());
  }
  ForEachRow(kv, n_fma, n_ctx, [&](int j, const uint16_t*, const uint16_t* v) {
    const __m512 pj = _mm512_set1_ps(p[j]);
    for (int d = 0; d < dh; d += kLanes) {
      const __m512 prod = _mm512_mul_ps(LoadF16(v + d), pj);
      _mm512_storeu_pd(sum + d, _mm512_add_pd(_mm512_loadu_pd(sum + d),
                                              _mm512_cvtps_pd(_mm512_castps512_ps256(prod))));
      _mm512_storeu_pd(sum + d + 8,
                       _mm512_add_pd(_mm512_loadu_pd(sum + d + 8),
                                     _mm512_cvtps_pd(_mm512_extractf32x8_ps(prod, 1))));
    }
  });
  for (int d = 0; d < dh; d += 8) {
    _mm256_storeu_ps(out + d, _mm512_cvtpd_ps(_mm512_loadu_pd(sum + d)));
  }
}

}  // namespace

void SiluMulRows(float* gate, const float* up, int64_t rows, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float* g = gate + r * n;
    const float* u = up + r * n;
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      const __m512 x = _mm512_loadu_ps(g + i);
      const __m512 e = Exp(_mm512_sub_ps(_mm512_setzero_ps(), x));
      const __m512 silu = _mm512_div_ps(x, _mm512_add_ps(one, e));
      _mm512_storeu_ps(g + i, _mm512_mul_ps(silu, _mm512_loadu_ps(u + i)));
    }
    for (; i < n; ++i) g[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
  }
}

void AttendHead(const uint16_t* q_f16, int head_dim, float scale, int n_ctx, const KvHeadRows& kv,
                float* scratch, float* out) {
  float q[512];
  for (int i = 0; i < head_dim; i += kLanes) _mm512_storeu_ps(q + i, LoadF16(q_f16 + i));
  float* p = scratch;
  float* acc = scratch + (n_ctx + kLanes - 1) / kLanes * kLanes;
  const float max = Scores(q, head_dim, scale, n_ctx, kv, p);
  Softmax(p, n_ctx, max);
  WeightedValues(p, head_dim, n_ctx, kv, acc, out);
}

}  // namespace pdserve::llama_numerics_avx512
