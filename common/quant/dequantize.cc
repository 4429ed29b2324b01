#include "common/quant/dequantize.h"

#include <cstring>

#include "common/quant/half.h"
#include "common/quant/quant_blocks.h"

namespace pdserve {

void DequantF32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void DequantF16(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(s[i]);
}

void DequantBf16(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(s[i]);
}

void DequantQ4_0(const void* src, float* dst, int64_t n) {
  const BlockQ4_0* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = F16ToF32(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>((b[i].qs[j] & 0x0F) - 8) * d;
      dst[j + kQK / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantQ4_1(const void* src, float* dst, int64_t n) {
  const BlockQ4_1* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = F16ToF32(b[i].d);
    const float m = F16ToF32(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>(b[i].qs[j] & 0x0F) * d + m;
      dst[j + kQK / 2] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

void DequantQ8_0(const void* src, float* dst, int64_t n) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = F16ToF32(b[i].d);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void DequantQ8_1(const void* src, float* dst, int64_t n) {
  const BlockQ8_1* b = static_cast<const BlockQ8_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = F16ToF32(b[i].d);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void DequantQ5_0(const void* src, float* dst, int64_t n) {
  const BlockQ5_0* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = F16ToF32(b[i].d);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, sizeof(qh));
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(Q5Value(b[i].qs, qh, j) - 16) * d;
  }
}

void DequantQ5_1(const void* src, float* dst, int64_t n) {
  const BlockQ5_1* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = F16ToF32(b[i].d);
    const float m = F16ToF32(b[i].m);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, sizeof(qh));
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(Q5Value(b[i].qs, qh, j)) * d + m;
  }
}

void UnpackQ4KScaleMin(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

namespace {

// Q4_K and Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins.
template <typename Block>
void DequantQ4Or5K(const void* src, float* dst, int64_t n) {
  const Block* b = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = F16ToF32(b[i].d);
    const float dmin = F16ToF32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int c = 0; c < 4; ++c, q += 32) {
      uint8_t sc, m;
      UnpackQ4KScaleMin(2 * c, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      UnpackQ4KScaleMin(2 * c + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      const auto lo_bit = static_cast<uint8_t>(1u << (2 * c));
      const auto hi_bit = static_cast<uint8_t>(2u << (2 * c));
      for (int l = 0; l < 32; ++l) {
        *dst++ = d1 * ((q[l] & 0xF) + KQuantHighBit(b[i], l, lo_bit)) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        *dst++ = d2 * ((q[l] >> 4) + KQuantHighBit(b[i], l, hi_bit)) - m2;
      }
    }
  }
}

}  // namespace

void DequantQ4_K(const void* src, float* dst, int64_t n) { DequantQ4Or5K<BlockQ4_K>(src, dst, n); }
void DequantQ5_K(const void* src, float* dst, int64_t n) { DequantQ4Or5K<BlockQ5_K>(src, dst, n); }

void DequantQ6_K(const void* src, float* dst, int64_t n) {
  const BlockQ6_K* b = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = F16ToF32(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, dst += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        dst[l] = d * sc[is + 0] * q1;
        dst[l + 32] = d * sc[is + 2] * q2;
        dst[l + 64] = d * sc[is + 4] * q3;
        dst[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

void DequantQ8_K(const void* src, float* dst, int64_t n) {
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i, dst += kQKK) {
    for (int j = 0; j < kQKK; ++j) dst[j] = b[i].d * b[i].qs[j];
  }
}

}  // namespace pdserve
