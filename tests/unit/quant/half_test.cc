#include "common/quant/half.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "common/quant/kernels.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

bool IsF16Nan(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0; }

// Independent oracle for f32 -> f16 rounding: among the finite f16 values
// (and inf once the value reaches the overflow threshold 65520), the nearest
// one, ties to an even mantissa. Exact in double.
uint16_t OracleF32ToF16(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
  const double a = std::fabs(static_cast<double>(f));
  if (std::isnan(f)) return sign | 0x7E00u;
  if (a >= 65520.0) return sign | 0x7C00u;
  // Magnitude bits are monotonic in value for non-negative f16.
  uint16_t lo = 0, hi = 0x7BFF;
  while (lo < hi) {  // largest h with value(h) <= a
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (static_cast<double>(F16ToF32(mid)) <= a) {
      lo = mid;
    } else {
      hi = static_cast<uint16_t>(mid - 1);
    }
  }
  if (lo == 0x7BFF) return sign | lo;  // a in [65504, 65520): rounds down
  const double below = F16ToF32(lo), above = F16ToF32(static_cast<uint16_t>(lo + 1));
  uint16_t pick = lo;
  if (a - below > above - a || (a - below == above - a && (lo & 1u) != 0)) {
    pick = static_cast<uint16_t>(lo + 1);
  }
  return sign | pick;
}

TEST(HalfTest, F16ToF32KnownValues) {
  EXPECT_EQ(F16ToF32(0x3C00), 1.0f);
  EXPECT_EQ(F16ToF32(0xC000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7BFF), 65504.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(F16ToF32(0x03FF), 1023.0f * std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(F16ToF32(0x3555), 0.333251953125f);
  EXPECT_EQ(FloatToBits(F16ToF32(0x8000)), 0x80000000u);
  EXPECT_EQ(F16ToF32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(F16ToF32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(F16ToF32(0x7E00)));
  EXPECT_TRUE(std::isnan(F16ToF32(0xFC01)));
}

TEST(HalfTest, EveryF16RoundTripsThroughF32) {
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = F16ToF32(bits);
    const uint16_t back = F32ToF16(f);
    if (IsF16Nan(bits)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      ASSERT_TRUE(IsF16Nan(back)) << std::hex << h;
      ASSERT_EQ(back & 0x8000u, bits & 0x8000u) << std::hex << h;
    } else {
      ASSERT_EQ(back, bits) << std::hex << h;
    }
  }
}

TEST(HalfTest, F32ToF16RoundsToNearestEven) {
  const float ulp1 = std::ldexp(1.0f, -10);                  // f16 ulp in [1, 2)
  EXPECT_EQ(F32ToF16(1.0f + ulp1 / 2), 0x3C00);              // tie -> even (down)
  EXPECT_EQ(F32ToF16(1.0f + 3 * ulp1 / 2), 0x3C02);          // tie -> even (up)
  EXPECT_EQ(F32ToF16(1.0f + ulp1 / 2 + ulp1 / 64), 0x3C01);  // just above tie
  EXPECT_EQ(F32ToF16(1.0f + ulp1 / 2 - ulp1 / 64), 0x3C00);  // just below tie
  EXPECT_EQ(F32ToF16(-(1.0f + 3 * ulp1 / 2)), 0xBC02);
  // Mantissa carry into the exponent: 2 - ulp/2 rounds up to 2.0 (even).
  EXPECT_EQ(F32ToF16(2.0f - std::ldexp(1.0f, -11)), 0x4000);
  EXPECT_EQ(F32ToF16(0.1f), 0x2E66);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7BFF);
  EXPECT_EQ(F32ToF16(65519.99f), 0x7BFF);  // below the overflow tie
}

TEST(HalfTest, F32ToF16OverflowAndSpecials) {
  EXPECT_EQ(F32ToF16(65520.0f), 0x7C00);  // tie between 65504 and 2^16 -> inf
  EXPECT_EQ(F32ToF16(1e6f), 0x7C00);
  EXPECT_EQ(F32ToF16(-1e30f), 0xFC00);
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::max()), 0x7C00);
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(F32ToF16(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_TRUE(IsF16Nan(F32ToF16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(IsF16Nan(F32ToF16(BitsToFloat(0x7F800001u))));  // signalling NaN, tiny payload
  EXPECT_TRUE(IsF16Nan(F32ToF16(BitsToFloat(0xFFC00000u))));
  EXPECT_EQ(F32ToF16(0.0f), 0x0000);
  EXPECT_EQ(F32ToF16(-0.0f), 0x8000);
}

TEST(HalfTest, F32ToF16Subnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // f16 subnormal ulp
  EXPECT_EQ(F32ToF16(tiny), 0x0001);
  EXPECT_EQ(F32ToF16(tiny / 2), 0x0000);     // tie -> even (zero)
  EXPECT_EQ(F32ToF16(tiny * 1.5f), 0x0002);  // tie -> even (2)
  EXPECT_EQ(F32ToF16(tiny * 2.5f), 0x0002);  // tie -> even (2)
  EXPECT_EQ(F32ToF16(tiny * 0.51f), 0x0001);
  EXPECT_EQ(F32ToF16(-tiny * 3), 0x8003);
  EXPECT_EQ(F32ToF16(tiny * 1023), 0x03FF);
  EXPECT_EQ(F32ToF16(tiny * 1023.5f), 0x0400);  // rounds up into the normals
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(F32ToF16(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::denorm_min()), 0x0000);
}

// Values spread over every f32 exponent that matters for f16 (and beyond).
std::vector<float> WideRandomFloats(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint32_t> mant(0, 0x7FFFFF);
  std::uniform_int_distribution<int> exp(127 - 30, 127 + 18);
  std::vector<float> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    uint32_t bits = (static_cast<uint32_t>(exp(rng)) << 23) | mant(rng);
    if (i % 7 == 0) bits = (bits & ~0x1FFFu) | 0x1000u;  // exact f16 ties
    if (i % 2 == 0) bits |= 0x80000000u;
    out.push_back(BitsToFloat(bits));
  }
  return out;
}

TEST(HalfTest, F32ToF16MatchesOracle) {
  for (float f : WideRandomFloats(100000, 11)) {
    ASSERT_EQ(F32ToF16(f), OracleF32ToF16(f)) << f << " bits " << std::hex << FloatToBits(f);
  }
  // A sparse sweep over the whole f32 bit space (NaNs compared as NaNs).
  for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += 4099) {
    const float f = BitsToFloat(static_cast<uint32_t>(b));
    if (std::isnan(f)) {
      ASSERT_TRUE(IsF16Nan(F32ToF16(f)));
      continue;
    }
    ASSERT_EQ(F32ToF16(f), OracleF32ToF16(f)) << std::hex << b;
  }
}

TEST(HalfTest, F32ToF16BitIdenticalToAvx2Kernel) {
  if (!CpuSupportsAvx2()) GTEST_SKIP() << "no AVX2/F16C";
  const KernelIsa saved = ActiveKernelIsa();
  ForceKernelIsaForTesting(KernelIsa::kAvx2);
  ASSERT_EQ(ActiveKernelIsa(), KernelIsa::kAvx2);
  std::vector<float> in = WideRandomFloats(100000, 5);
  in.push_back(std::numeric_limits<float>::infinity());
  in.push_back(65520.0f);
  in.push_back(std::ldexp(1.0f, -25));
  in.push_back(-0.0f);
  std::vector<uint16_t> simd(in.size());
  // An odd length exercises the vector body and the scalar tail.
  GetAttentionKernels().to_f16(in.data(), simd.data(), static_cast<int>(in.size()));
  ForceKernelIsaForTesting(saved);
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(F32ToF16(in[i]), simd[i]) << in[i] << " bits " << std::hex << FloatToBits(in[i]);
  }
}

TEST(HalfTest, RoundThroughF16) {
  EXPECT_EQ(RoundThroughF16(1.0f + std::ldexp(1.0f, -11)), 1.0f);
  EXPECT_EQ(RoundThroughF16(0.1f), F16ToF32(0x2E66));
  EXPECT_EQ(RoundThroughF16(1e6f), std::numeric_limits<float>::infinity());
}

TEST(HalfTest, EveryBf16RoundTripsThroughF32) {
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = Bf16ToF32(bits);
    ASSERT_EQ(FloatToBits(f), h << 16);
    const uint16_t back = F32ToBf16(f);
    const bool nan = (bits & 0x7F80u) == 0x7F80u && (bits & 0x7Fu) != 0;
    if (nan) {
      ASSERT_TRUE(std::isnan(Bf16ToF32(back))) << std::hex << h;
      ASSERT_NE(back & 0x40u, 0u) << "NaN must come back quiet " << std::hex << h;
      ASSERT_EQ(back & 0x8000u, bits & 0x8000u);
    } else {
      ASSERT_EQ(back, bits) << std::hex << h;
    }
  }
}

TEST(HalfTest, F32ToBf16RoundsToNearestEven) {
  EXPECT_EQ(F32ToBf16(BitsToFloat(0x3F808000u)), 0x3F80);  // tie, even below
  EXPECT_EQ(F32ToBf16(BitsToFloat(0x3F818000u)), 0x3F82);  // tie, even above
  EXPECT_EQ(F32ToBf16(BitsToFloat(0x3F808001u)), 0x3F81);  // just above tie
  EXPECT_EQ(F32ToBf16(BitsToFloat(0x3F807FFFu)), 0x3F80);  // just below tie
  EXPECT_EQ(F32ToBf16(BitsToFloat(0xBF818000u)), 0xBF82);
  EXPECT_EQ(F32ToBf16(BitsToFloat(0x7F7FFFFFu)), 0x7F80);  // max float rounds to inf
  EXPECT_EQ(F32ToBf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(F32ToBf16(BitsToFloat(0x00018000u)), 0x0002);  // subnormal tie
  EXPECT_EQ(F32ToBf16(-0.0f), 0x8000);
  const uint16_t snan = F32ToBf16(BitsToFloat(0x7F800001u));  // payload only in low bits
  EXPECT_TRUE(std::isnan(Bf16ToF32(snan)));
}

TEST(HalfTest, F32ToBf16MatchesOracle) {
  for (float f : WideRandomFloats(100000, 3)) {
    const uint32_t x = FloatToBits(f);
    const uint16_t lo = static_cast<uint16_t>(x >> 16);
    const double a = f, below = Bf16ToF32(lo), above = Bf16ToF32(static_cast<uint16_t>(lo + 1));
    // Nearest of the two bf16 neighbours towards larger magnitude; ties to even.
    uint16_t want = lo;
    const double dl = std::fabs(a - below), du = std::fabs(above - a);
    if (du < dl || (du == dl && (lo & 1u) != 0)) want = static_cast<uint16_t>(lo + 1);
    ASSERT_EQ(F32ToBf16(f), want) << std::hex << x;
  }
}

}  // namespace
}  // namespace pdserve
