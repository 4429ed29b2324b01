// The int8 KV quantiser (common/cpu/kv_int8.h): every element decodes within
// half a quantisation step of its input, the step being the row's absmax /
// 127, and the two attention products equal their dequantised definitions
// up to float summation error.
#include "common/cpu/kv_int8.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace pdserve {
namespace {

constexpr float kEps = std::numeric_limits<float>::epsilon();

// Rows of K/V-like values: mostly small, with an occasional outlier channel
// (what makes one shared scale coarse), at several magnitudes.
std::vector<float> RandomRow(std::mt19937& rng, int n, float magnitude) {
  std::normal_distribution<float> normal(0.0f, magnitude);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  x[rng() % n] *= 20.0f;
  return x;
}

TEST(KvInt8Test, RoundTripIsWithinHalfAStep) {
  std::mt19937 rng(7);
  for (int n : {1, 7, 16, 64, 128}) {
    for (float magnitude : {1e-3f, 0.5f, 30.0f, 4000.0f}) {
      const std::vector<float> x = RandomRow(rng, n, magnitude);
      std::vector<int8_t> q(n);
      const float scale = QuantizeKvInt8(x.data(), n, q.data());
      float absmax = 0.0f;
      for (float v : x) absmax = std::max(absmax, std::fabs(v));
      EXPECT_FLOAT_EQ(scale, absmax / 127.0f);
      std::vector<float> y(n);
      DequantizeKvInt8(q.data(), scale, n, y.data());
      int extremes = 0;
      for (int i = 0; i < n; ++i) {
        // Half a step from rounding x / scale, plus the float roundings of
        // that division and of q * scale (a few ulps of absmax).
        EXPECT_LE(std::fabs(y[i] - x[i]), 0.5f * scale + 4.0f * kEps * absmax)
            << "n=" << n << " magnitude=" << magnitude << " i=" << i;
        EXPECT_GE(q[i], -127);
        extremes += std::abs(q[i]) == 127;
      }
      EXPECT_GE(extremes, 1) << "the absmax element must use the full range";
    }
  }
}

TEST(KvInt8Test, ZeroRowHasZeroScaleAndDecodesToZero) {
  const std::vector<float> x(64, 0.0f);
  std::vector<int8_t> q(64, 5);
  EXPECT_EQ(QuantizeKvInt8(x.data(), 64, q.data()), 0.0f);
  for (int8_t v : q) EXPECT_EQ(v, 0);
}

TEST(KvInt8Test, QuantisingTheDecodedRowIsIdempotent) {
  std::mt19937 rng(11);
  const std::vector<float> x = RandomRow(rng, 64, 2.0f);
  std::vector<int8_t> q(64), q2(64);
  const float scale = QuantizeKvInt8(x.data(), 64, q.data());
  std::vector<float> y(64);
  DequantizeKvInt8(q.data(), scale, 64, y.data());
  QuantizeKvInt8(y.data(), 64, q2.data());
  EXPECT_EQ(q, q2);
}

TEST(KvInt8Test, DotAndAxpyEqualTheirDequantisedDefinitions) {
  std::mt19937 rng(3);
  for (int n : {5, 16, 64, 100}) {
    const std::vector<float> k = RandomRow(rng, n, 1.0f);
    const std::vector<float> x = RandomRow(rng, n, 1.0f);
    std::vector<int8_t> q(n);
    QuantizeKvInt8(k.data(), n, q.data());
    double want = 0.0, abs_sum = 0.0;
    for (int i = 0; i < n; ++i) {
      want += static_cast<double>(q[i]) * x[i];
      abs_sum += std::fabs(static_cast<double>(q[i]) * x[i]);
    }
    // Recursive float summation: error <= n * eps * sum |terms|.
    EXPECT_NEAR(DotKvInt8(q.data(), x.data(), n), want, n * kEps * abs_sum) << "n=" << n;

    std::vector<float> acc = x;
    AxpyKvInt8(0.25f, q.data(), acc.data(), n);
    for (int i = 0; i < n; ++i) {
      const double exact = x[i] + 0.25 * q[i];
      EXPECT_NEAR(acc[i], exact, 2 * kEps * std::fabs(exact) + 1e-30) << "n=" << n << " i=" << i;
    }
  }
}

}  // namespace
}  // namespace pdserve
