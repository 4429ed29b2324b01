// A weight matrix of random quantised bytes (every value of each format,
// Q8_0's -128 included; the K-quants' packed 6-bit scales and mins over
// their full range) with small random f16 block scales, so that no value
// is Inf or NaN. For the kernel tests.
#ifndef PDSERVE_TESTS_TESTING_RANDOM_WEIGHT_MATRIX_H_
#define PDSERVE_TESTS_TESTING_RANDOM_WEIGHT_MATRIX_H_

#include <cstdint>
#include <random>
#include <vector>

#include "common/model/model_weights.h"
#include "common/gguf/ggml_type.h"
#include "common/quant/half.h"
#include "common/quant/quant_blocks.h"
#include "gtest/gtest.h"

namespace pdserve::testing {

struct RandomWeightMatrix {
  std::vector<uint8_t> bytes;
  WeightMatrix w;

  // Scales drawn from [min_scale, max_scale) (K-quants' d and dmin a tenth
  // of that, Q6_K's d a fiftieth: their sums are larger).
  RandomWeightMatrix(GgmlType type, int64_t in, int64_t out, std::mt19937_64& rng,
                     float min_scale = 0.001f, float max_scale = 0.05f) {
    w.type = static_cast<uint32_t>(type);
    w.in = in;
    w.out = out;
    w.row_bytes = GgmlRowBytes(w.type, in);
    bytes.resize(static_cast<size_t>(w.row_bytes * out));
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    std::uniform_real_distribution<float> scale(min_scale, max_scale);
    const int64_t block_elems = FindGgmlTypeTraits(w.type)->block_elems;
    for (int64_t r = 0; r < out; ++r) {
      uint8_t* row = bytes.data() + r * w.row_bytes;
      for (int64_t b = 0; b < in / block_elems; ++b) SetScales(type, row, b, scale, rng);
    }
    w.data = bytes.data();
  }
  // w points into bytes.
  RandomWeightMatrix(const RandomWeightMatrix&) = delete;
  RandomWeightMatrix& operator=(const RandomWeightMatrix&) = delete;

 private:
  static void SetScales(GgmlType type, uint8_t* row, int64_t b,
                        std::uniform_real_distribution<float>& scale, std::mt19937_64& rng) {
    switch (type) {
      case GgmlType::kQ4_1: {
        auto* blk = reinterpret_cast<BlockQ4_1*>(row) + b;
        blk->d = F32ToF16(scale(rng));
        blk->m = F32ToF16(-8.0f * scale(rng));
        break;
      }
      case GgmlType::kQ8_0:
        reinterpret_cast<BlockQ8_0*>(row)[b].d = F32ToF16(scale(rng));
        break;
      case GgmlType::kQ5_0:
        reinterpret_cast<BlockQ5_0*>(row)[b].d = F32ToF16(scale(rng));
        break;
      case GgmlType::kQ4_K: {
        auto* blk = reinterpret_cast<BlockQ4_K*>(row) + b;
        blk->d = F32ToF16(scale(rng) * 0.1f);
        blk->dmin = F32ToF16(scale(rng) * 0.1f);
        break;
      }
      case GgmlType::kQ6_K:
        reinterpret_cast<BlockQ6_K*>(row)[b].d = F32ToF16(scale(rng) * 0.02f);
        break;
      default:
        FAIL() << "no scales for type " << static_cast<uint32_t>(type);
    }
  }
};

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_TESTING_RANDOM_WEIGHT_MATRIX_H_
