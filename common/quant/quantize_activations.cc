#include "common/quant/quantize_activations.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/quant/half.h"
#include "common/quant/quant_blocks.h"

namespace pdserve {
namespace {

float AbsMax(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

// Quantises 32 values with scale 127/amax and round-half-even; returns the
// f32 scale d and the sum of the quantised values.
float QuantizeBlock32(const float* x, int8_t* qs, int* sum) {
  const float amax = AbsMax(x, kQK);
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  int s = 0;
  for (int j = 0; j < kQK; ++j) {
    const int q = static_cast<int>(std::nearbyintf(x[j] * id));
    qs[j] = static_cast<int8_t>(q);
    s += q;
  }
  *sum = s;
  return d;
}

}  // namespace

void QuantizeRowQ8_0(const float* x, void* dst, int64_t n) {
  BlockQ8_0* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    int sum;
    y[i].d = F32ToF16(QuantizeBlock32(x, y[i].qs, &sum));
  }
}

void QuantizeRowQ8_1(const float* x, void* dst, int64_t n) {
  BlockQ8_1* y = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    int sum;
    const float d = QuantizeBlock32(x, y[i].qs, &sum);
    y[i].d = F32ToF16(d);
    y[i].s = F32ToF16(d * static_cast<float>(sum));
  }
}

void QuantizeRowQ8_K(const float* x, void* dst, int64_t n) {
  BlockQ8_K* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < kQKK; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQKK; ++j) {
      const int v = static_cast<int>(std::nearbyintf(iscale * x[j]));
      y[i].qs[j] = static_cast<int8_t>(std::min(127, v));
    }
    for (int j = 0; j < kQKK / 16; ++j) {
      int s = 0;
      for (int k = 0; k < 16; ++k) s += y[i].qs[j * 16 + k];
      y[i].bsums[j] = static_cast<int16_t>(s);
    }
    y[i].d = 1.0f / iscale;
  }
}

void QuantizeRowF16(const float* x, void* dst, int64_t n) {
  uint16_t* y = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) y[i] = F32ToF16(x[i]);
}

void QuantizeRowBf16(const float* x, void* dst, int64_t n) {
  uint16_t* y = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) y[i] = F32ToBf16(x[i]);
}

void QuantizeRowF32(const float* x, void* dst, int64_t n) {
  std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
}

void QuantizeRowQ4_0(const float* x, void* dst, int64_t n) {
  BlockQ4_0* y = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = F32ToF16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + kQK / 2] * id + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantizeRowQ4_1(const float* x, void* dst, int64_t n) {
  BlockQ4_1* y = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < kQK; ++j) {
      lo = std::min(lo, x[j]);
      hi = std::max(hi, x[j]);
    }
    const float d = (hi - lo) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = F32ToF16(d);
    y[i].m = F32ToF16(lo);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>((x[j] - lo) * id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((x[j + kQK / 2] - lo) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

}  // namespace pdserve
