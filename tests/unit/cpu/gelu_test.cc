// GeluMulRows: the SIMD path (F16C rounding, gathered table entries,
// the |x| >= 10 bypasses) gives the scalar path's bits for every input
// class, every tail length, and the table matches the formula rounded
// through f16 as ggml builds it.
#include "common/cpu/gelu.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/quant/half.h"
#include "common/quant/kernels.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

std::vector<float> Inputs(std::mt19937_64& rng) {
  std::vector<float> x = {-10.0f, 10.0f, -9.999f, 9.999f, -10.001f, 10.001f, 0.0f, -0.0f,
                          65504.0f, -65504.0f, 1e-8f, -1e-8f, 3.0f, -3.0f, 1e30f, -1e30f};
  std::normal_distribution<float> wide(0.0f, 6.0f);
  for (int i = 0; i < 5000; ++i) x.push_back(wide(rng));
  // Every f16 value in (-12, 12): each table entry the SIMD path can gather.
  for (uint32_t h = 0; h < (1u << 16); ++h) {
    const float v = F16ToF32(static_cast<uint16_t>(h));
    if (std::fabs(v) < 12.0f) x.push_back(v);
  }
  return x;
}

TEST(GeluTest, SimdEqualsScalarBitwise) {
  if (!CpuSupportsAvx2()) GTEST_SKIP() << "no AVX2";
  std::mt19937_64 rng(5);
  const std::vector<float> x = Inputs(rng);
  std::vector<float> up(x.size());
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (float& v : up) v = u(rng);
  const KernelIsa saved = ActiveKernelIsa();
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 640}) {
    for (size_t at = 0; at + n <= x.size(); at += 997) {
      std::vector<float> simd(x.begin() + at, x.begin() + at + n), scalar = simd;
      ForceKernelIsaForTesting(KernelIsa::kAvx2);
      GeluMulRows(simd.data(), up.data() + at, 1, n);
      ForceKernelIsaForTesting(KernelIsa::kScalar);
      GeluMulRows(scalar.data(), up.data() + at, 1, n);
      ForceKernelIsaForTesting(saved);
      ASSERT_EQ(0, std::memcmp(simd.data(), scalar.data(), n * sizeof(float)))
          << "n " << n << " at " << at;
    }
  }
}

TEST(GeluTest, TableIsTheFormulaThroughF16) {
  const KernelIsa saved = ActiveKernelIsa();
  ForceKernelIsaForTesting(KernelIsa::kScalar);
  for (float v : {-9.5f, -1.0f, -0.25f, 0.0f, 0.5f, 2.0f, 9.5f}) {
    float g = v;
    const float one = 1.0f;
    GeluMulRows(&g, &one, 1, 1);
    EXPECT_EQ(g, F16ToF32(F32ToF16(GeluTanh(F16ToF32(F32ToF16(v)))))) << v;
  }
  float big = 12.0f, small = -12.0f;
  const float two = 2.0f;
  GeluMulRows(&big, &two, 1, 1);
  GeluMulRows(&small, &two, 1, 1);
  EXPECT_EQ(big, 24.0f);
  EXPECT_EQ(small, 0.0f);
  ForceKernelIsaForTesting(saved);
}

}  // namespace
}  // namespace pdserve
