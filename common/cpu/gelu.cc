#include "common/cpu/gelu.h"

#include <cmath>
#include <vector>

#include "common/quant/half.h"

namespace pdserve {
namespace {

// gelu of every f16 value, rounded to f16 (ggml_table_gelu_f16).
const std::vector<uint16_t>& GeluTable() {
  static const std::vector<uint16_t>* table = [] {
    auto* t = new std::vector<uint16_t>(1 << 16);
    for (uint32_t i = 0; i < t->size(); ++i) {
      (*t)[i] = F32ToF16(GeluTanh(F16ToF32(static_cast<uint16_t>(i))));
    }
    return t;
  }();
  return *table;
}

}  // namespace

float GeluTanh(float x) {
  constexpr float kCoefA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  // ggml's ggml_gelu_f32 as GCC compiles it for an FMA CPU (it contracts
  // 1 + a*x*x into one fused multiply-add; the table is built from it).
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * std::fma(kCoefA * x, x, 1.0f)));
}

void GeluMulRows(float* gate, const float* up, int64_t rows, int64_t n) {
  const std::vector<uint16_t>& table = GeluTable();
  for (int64_t i = 0; i < rows * n; ++i) {
    const float x = gate[i];
    float g;
    if (x <= -10.0f) {
      g = 0.0f;
    } else if (x >= 10.0f) {
      g = x;
    } else {
      g = F16ToF32(table[F32ToF16(x)]);
    }
    gate[i] = g * up[i];
  }
}

}  // namespace pdserve
