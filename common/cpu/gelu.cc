#include "common/cpu/gelu.h"

#include <immintrin.h>

#include <cmath>
#include <vector>

#include "common/quant/half.h"
#include "common/quant/kernels.h"

namespace pdserve {
namespace {

// gelu of every f16 value, rounded to f16 (ggml_table_gelu_f16); one
// entry of padding, so that a 4-byte gather at the last index stays inside.
const std::vector<uint16_t>& GeluTable() {
  static const std::vector<uint16_t>* table = [] {
    auto* t = new std::vector<uint16_t>((1 << 16) + 1, 0);
    for (uint32_t i = 0; i < (1u << 16); ++i) {
      (*t)[i] = F32ToF16(GeluTanh(F16ToF32(static_cast<uint16_t>(i))));
    }
    return t;
  }();
  return *table;
}

// GeluMulRows's loop, eight at a time: the same f16 rounding (F16C's
// round-to-nearest-even), the same table entry, the same bypasses and the
// same multiply, so the same bits. Only called where the CPU has AVX2 and
// F16C.
__attribute__((target("avx2,f16c"))) int64_t GeluMulAvx2(const uint16_t* table, float* gate,
                                                         const float* up, int64_t count) {
  const __m256 low = _mm256_set1_ps(-10.0f), high = _mm256_set1_ps(10.0f);
  const __m256i mask16 = _mm256_set1_epi32(0xFFFF);
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    const __m256i index = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    const __m256i entry = _mm256_and_si256(
        _mm256_i32gather_epi32(reinterpret_cast<const int*>(table), index, 2), mask16);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(entry),
                                            _mm256_extracti128_si256(entry, 1));
    __m256 g = _mm256_cvtph_ps(packed);
    g = _mm256_blendv_ps(g, x, _mm256_cmp_ps(x, high, _CMP_GE_OQ));
    g = _mm256_blendv_ps(g, _mm256_setzero_ps(), _mm256_cmp_ps(x, low, _CMP_LE_OQ));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(g, _mm256_loadu_ps(up + i)));
  }
  return i;
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
  int64_t i = 0;
  if (ActiveKernelIsa() != KernelIsa::kScalar) i = GeluMulAvx2(table.data(), gate, up, rows * n);
  for (; i < rows * n; ++i) {
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
