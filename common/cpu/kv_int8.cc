#include "common/cpu/kv_int8.h"

#include <algorithm>
#include <cmath>

namespace pdserve {

float QuantizeKvInt8(const float* x, int n, int8_t* q) {
  float absmax = 0.0f;
  for (int i = 0; i < n; ++i) absmax = std::max(absmax, std::fabs(x[i]));
  if (absmax == 0.0f) {
    std::fill_n(q, n, int8_t{0});
    return 0.0f;
  }
  const float scale = absmax / 127.0f;
  for (int i = 0; i < n; ++i) {
    const float r = std::nearbyint(x[i] / scale);
    q[i] = static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
  }
  return scale;
}

void DequantizeKvInt8(const int8_t* q, float scale, int n, float* out) {
  for (int i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * scale;
}

// The two products run once per cached position per head per layer, so they
// are cloned for AVX2 (picked at load time by the CPU, via ifunc) as well as
// the baseline ISA. Neither clone may contract to FMA (AVX2 alone does not
// enable it) and the partial sums below fix the summation order, so both
// clones give bitwise the same results.
#define PDSERVE_KV_INT8_CLONES __attribute__((target_clones("avx2", "default")))

// Sixteen independent partial sums, so the compiler can keep them in
// vector registers without reassociating a single float reduction, then
// summed as a tree.
PDSERVE_KV_INT8_CLONES float DotKvInt8(const int8_t* q, const float* x, int n) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += static_cast<float>(q[i + j]) * x[i + j];
  }
  for (; i < n; ++i) acc[i % kLanes] += static_cast<float>(q[i]) * x[i];
  // Pairwise: 4 dependent adds instead of a serial chain of 16.
  for (int w = kLanes / 2; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  }
  return acc[0];
}

PDSERVE_KV_INT8_CLONES void AxpyKvInt8(float a, const int8_t* q, float* acc, int n) {
  for (int i = 0; i < n; ++i) acc[i] += a * static_cast<float>(q[i]);
}

}  // namespace pdserve
