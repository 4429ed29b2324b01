// Portable kernels: the reference every SIMD variant is tested against and
// the fallback on CPUs without AVX2.
#include <cstring>

#include "common/quant/dequantize.h"
#include "common/quant/half.h"
#include "common/quant/kernels.h"
#include "common/quant/quant_blocks.h"
#include "common/quant/quantize_activations.h"

namespace pdserve::kernels_scalar {
namespace {

float DotF32(int64_t n, const void* w, const void* a) {
  const float* x = static_cast<const float*>(w);
  const float* y = static_cast<const float*>(a);
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}

float DotF16(int64_t n, const void* w, const void* a) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  const uint16_t* y = static_cast<const uint16_t*>(a);
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += F16ToF32(x[i]) * F16ToF32(y[i]);
  return s;
}

float DotBf16(int64_t n, const void* w, const void* a) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  const uint16_t* y = static_cast<const uint16_t*>(a);
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += Bf16ToF32(x[i]) * Bf16ToF32(y[i]);
  return s;
}

float DotQ4_0Q8_0(int64_t n, const void* w, const void* a) {
  const BlockQ4_0* x = static_cast<const BlockQ4_0*>(w);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += ((x[i].qs[j] & 0x0F) - 8) * y[i].qs[j];
      sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + kQK / 2];
    }
    s += static_cast<float>(sumi) * (F16ToF32(x[i].d) * F16ToF32(y[i].d));
  }
  return s;
}

float DotQ4_1Q8_1(int64_t n, const void* w, const void* a) {
  const BlockQ4_1* x = static_cast<const BlockQ4_1*>(w);
  const BlockQ8_1* y = static_cast<const BlockQ8_1*>(a);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += (x[i].qs[j] & 0x0F) * y[i].qs[j];
      sumi += (x[i].qs[j] >> 4) * y[i].qs[j + kQK / 2];
    }
    s += (F16ToF32(x[i].d) * F16ToF32(y[i].d)) * static_cast<float>(sumi) +
         F16ToF32(x[i].m) * F16ToF32(y[i].s);
  }
  return s;
}

float DotQ8_0Q8_0(int64_t n, const void* w, const void* a) {
  const BlockQ8_0* x = static_cast<const BlockQ8_0*>(w);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += x[i].qs[j] * y[i].qs[j];
    s += static_cast<float>(sumi) * (F16ToF32(x[i].d) * F16ToF32(y[i].d));
  }
  return s;
}

// llama.cpp's ggml_vec_dot_q5_0_q8_0 (scalar): integer sums per block,
// scaled by d_w * d_a.
float DotQ5_0Q8_0(int64_t n, const void* w, const void* a) {
  const BlockQ5_0* x = static_cast<const BlockQ5_0*>(w);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += (Q5Value(x[i].qs, qh, j) - 16) * y[i].qs[j];
    s += (F16ToF32(x[i].d) * F16ToF32(y[i].d)) * static_cast<float>(sumi);
  }
  return s;
}

// The min term folds into the activation block's s = d * sum(qs).
float DotQ5_1Q8_1(int64_t n, const void* w, const void* a) {
  const BlockQ5_1* x = static_cast<const BlockQ5_1*>(w);
  const BlockQ8_1* y = static_cast<const BlockQ8_1*>(a);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += Q5Value(x[i].qs, qh, j) * y[i].qs[j];
    s += (F16ToF32(x[i].d) * F16ToF32(y[i].d)) * static_cast<float>(sumi) +
         F16ToF32(x[i].m) * F16ToF32(y[i].s);
  }
  return s;
}

// Q4_K and Q5_K: integer sums per sub-block, scaled by the 6-bit scales;
// the mins go against the activation block sums.
template <typename Block>
float DotQ4Or5KQ8_K(int64_t n, const void* w, const void* a) {
  const Block* x = static_cast<const Block*>(w);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    int isum = 0, msum = 0;
    const uint8_t* q = x[i].qs;
    const int8_t* qy = y[i].qs;
    for (int c = 0; c < 4; ++c, q += 32, qy += 64) {
      uint8_t sc0, m0, sc1, m1;
      UnpackQ4KScaleMin(2 * c, x[i].scales, &sc0, &m0);
      UnpackQ4KScaleMin(2 * c + 1, x[i].scales, &sc1, &m1);
      const auto lo_bit = static_cast<uint8_t>(1u << (2 * c));
      const auto hi_bit = static_cast<uint8_t>(2u << (2 * c));
      int lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        lo += ((q[l] & 0xF) + KQuantHighBit(x[i], l, lo_bit)) * qy[l];
        hi += ((q[l] >> 4) + KQuantHighBit(x[i], l, hi_bit)) * qy[l + 32];
      }
      isum += sc0 * lo + sc1 * hi;
      msum += m0 * (y[i].bsums[4 * c] + y[i].bsums[4 * c + 1]) +
              m1 * (y[i].bsums[4 * c + 2] + y[i].bsums[4 * c + 3]);
    }
    s += F16ToF32(x[i].d) * y[i].d * static_cast<float>(isum) -
         F16ToF32(x[i].dmin) * y[i].d * static_cast<float>(msum);
  }
  return s;
}

float DotQ4_KQ8_K(int64_t n, const void* w, const void* a) {
  return DotQ4Or5KQ8_K<BlockQ4_K>(n, w, a);
}

float DotQ5_KQ8_K(int64_t n, const void* w, const void* a) {
  return DotQ4Or5KQ8_K<BlockQ5_K>(n, w, a);
}

float DotQ6_KQ8_K(int64_t n, const void* w, const void* a) {
  const BlockQ6_K* x = static_cast<const BlockQ6_K*>(w);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    int8_t q[kQKK];
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32) {
      int8_t* o = q + 128 * half;
      for (int l = 0; l < 32; ++l) {
        o[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        o[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        o[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        o[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
    }
    int isum = 0;
    for (int g = 0; g < kQKK / 16; ++g) {
      int gs = 0;
      for (int l = 0; l < 16; ++l) gs += q[16 * g + l] * y[i].qs[16 * g + l];
      isum += x[i].scales[g] * gs;
    }
    s += F16ToF32(x[i].d) * y[i].d * static_cast<float>(isum);
  }
  return s;
}

float AttnDotF16(const uint16_t* k, const float* q, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += F16ToF32(k[i]) * q[i];
  return s;
}

void AttnAxpyF16(float a, const uint16_t* v, float* acc, int n) {
  for (int i = 0; i < n; ++i) acc[i] += a * F16ToF32(v[i]);
}

void AttnToF16(const float* src, uint16_t* dst, int n) {
  for (int i = 0; i < n; ++i) dst[i] = F32ToF16(src[i]);
}

void AttnDotF16Rows(const uint16_t* k, const float* q, int n, int rows, float* out) {
  for (int r = 0; r < rows; ++r) out[r] = AttnDotF16(k, q + static_cast<int64_t>(r) * n, n);
}

void AttnAxpyF16Seq(const float* a, const uint16_t* const* v, int count, float* acc, int n) {
  for (int c = 0; c < count; ++c) AttnAxpyF16(a[c], v[c], acc, n);
}

const TypeKernels kTable[] = {
    {GgmlType::kF32, GgmlType::kF32, DequantF32, QuantizeRowF32, DotF32, nullptr, nullptr},
    {GgmlType::kF16, GgmlType::kF16, DequantF16, QuantizeRowF16, DotF16, nullptr, nullptr},
    {GgmlType::kBF16, GgmlType::kBF16, DequantBf16, QuantizeRowBf16, DotBf16, nullptr, nullptr},
    {GgmlType::kQ4_0, GgmlType::kQ8_0, DequantQ4_0, QuantizeRowQ8_0, DotQ4_0Q8_0, nullptr, nullptr},
    {GgmlType::kQ4_1, GgmlType::kQ8_1, DequantQ4_1, QuantizeRowQ8_1, DotQ4_1Q8_1, nullptr, nullptr},
    {GgmlType::kQ5_0, GgmlType::kQ8_0, DequantQ5_0, QuantizeRowQ8_0, DotQ5_0Q8_0, nullptr, nullptr},
    {GgmlType::kQ5_1, GgmlType::kQ8_1, DequantQ5_1, QuantizeRowQ8_1, DotQ5_1Q8_1, nullptr, nullptr},
    {GgmlType::kQ8_0, GgmlType::kQ8_0, DequantQ8_0, QuantizeRowQ8_0, DotQ8_0Q8_0, nullptr, nullptr},
    {GgmlType::kQ4_K, GgmlType::kQ8_K, DequantQ4_K, QuantizeRowQ8_K, DotQ4_KQ8_K, nullptr, nullptr},
    {GgmlType::kQ5_K, GgmlType::kQ8_K, DequantQ5_K, QuantizeRowQ8_K, DotQ5_KQ8_K, nullptr, nullptr},
    {GgmlType::kQ6_K, GgmlType::kQ8_K, DequantQ6_K, QuantizeRowQ8_K, DotQ6_KQ8_K, nullptr, nullptr},
};

}  // namespace

const AttentionKernels kAttention = {AttnDotF16, AttnAxpyF16, AttnToF16, AttnDotF16Rows,
                                     AttnAxpyF16Seq};

const TypeKernels* Find(uint32_t weight_type) {
  for (const TypeKernels& k : kTable) {
    if (static_cast<uint32_t>(k.weight_type) == weight_type) return &k;
  }
  return nullptr;
}

}  // namespace pdserve::kernels_scalar
