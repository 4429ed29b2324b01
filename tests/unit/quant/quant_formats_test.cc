// Block formats: activation quantisers and dequantisers against the
// formulas of reference/smollm2-gguf.md §2, and the GGML type table (§1).
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/quant/dequantize.h"
#include "common/gguf/ggml_type.h"
#include "common/quant/half.h"
#include "common/quant/quant_blocks.h"
#include "common/quant/quantize_activations.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

uint32_t Id(GgmlType t) { return static_cast<uint32_t>(t); }

std::vector<float> RandomFloats(int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Random bytes with small positive f16 super-block scales.
std::string RandomKQuantRow(GgmlType type, int64_t n, std::mt19937_64& rng) {
  std::string s(GgmlRowBytes(Id(type), n), '\0');
  for (char& c : s) c = static_cast<char>(rng());
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    if (type == GgmlType::kQ4_K) {
      auto* b = reinterpret_cast<BlockQ4_K*>(s.data()) + i;
      b->d = F32ToF16(scale(rng));
      b->dmin = F32ToF16(scale(rng));
    } else {
      reinterpret_cast<BlockQ6_K*>(s.data())[i].d = F32ToF16(scale(rng));
    }
  }
  return s;
}

TEST(QuantFormatsTest, ActivationQuantisersFollowTheFormula) {
  std::mt19937_64 rng(4);
  std::vector<float> x = RandomFloats(kQKK, rng);
  x[3] = 127.0f;  // amax of the first 32-block: q8 scale exactly 1
  x[4] = 2.5f;    // tie -> 2 (half to even)
  x[5] = -3.5f;   // tie -> -4
  BlockQ8_1 q81[kQKK / kQK];
  QuantizeRowQ8_1(x.data(), q81, kQKK);
  EXPECT_EQ(q81[0].d, F32ToF16(1.0f));
  EXPECT_EQ(q81[0].qs[3], 127);
  EXPECT_EQ(q81[0].qs[4], 2);
  EXPECT_EQ(q81[0].qs[5], -4);
  int sum = 0;
  for (int j = 0; j < kQK; ++j) {
    EXPECT_EQ(q81[0].qs[j], static_cast<int>(std::nearbyint(x[j])));
    sum += q81[0].qs[j];
  }
  EXPECT_EQ(q81[0].s, F32ToF16(static_cast<float>(sum)));
  BlockQ8_K q8k;
  x[3] = -254.0f;  // max |x| is negative: iscale = -127 / -254 = 0.5
  x[4] = 127.0f;   // 63.5: a tie -> 64
  x[5] = 125.0f;   // 62.5 -> 62
  QuantizeRowQ8_K(x.data(), &q8k, kQKK);
  EXPECT_EQ(q8k.qs[3], -127);
  EXPECT_EQ(q8k.qs[4], 64);
  EXPECT_EQ(q8k.qs[5], 62);
  EXPECT_EQ(q8k.d, 2.0f);
  for (int g = 0; g < kQKK / 16; ++g) {
    int s = 0;
    for (int l = 0; l < 16; ++l) s += q8k.qs[16 * g + l];
    EXPECT_EQ(q8k.bsums[g], s);
  }
  std::vector<float> zeros(kQKK, 0.0f);
  QuantizeRowQ8_K(zeros.data(), &q8k, kQKK);
  EXPECT_EQ(q8k.d, 0.0f);
}

TEST(QuantFormatsTest, LegacyBlocksDecodeByHand) {
  BlockQ4_0 b40;
  b40.d = F32ToF16(0.5f);
  BlockQ4_1 b41;
  b41.d = F32ToF16(0.25f);
  b41.m = F32ToF16(-1.5f);
  BlockQ8_0 b80;
  b80.d = F32ToF16(0.125f);
  for (int j = 0; j < 16; ++j) {
    b40.qs[j] = b41.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  }
  for (int j = 0; j < 32; ++j) b80.qs[j] = static_cast<int8_t>(j * 7 - 100);
  float x40[32], x41[32], x80[32];
  DequantQ4_0(&b40, x40, 32);
  DequantQ4_1(&b41, x41, 32);
  DequantQ8_0(&b80, x80, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(x40[j], (j - 8) * 0.5f);
    EXPECT_EQ(x40[j + 16], (15 - j - 8) * 0.5f);
    EXPECT_EQ(x41[j], j * 0.25f - 1.5f);
    EXPECT_EQ(x41[j + 16], (15 - j) * 0.25f - 1.5f);
  }
  for (int j = 0; j < 32; ++j) EXPECT_EQ(x80[j], (j * 7 - 100) * 0.125f);
}

TEST(QuantFormatsTest, WeightQuantisersRoundTripWithinHalfAStep) {
  std::mt19937_64 rng(8);
  const std::vector<float> x = RandomFloats(256, rng);
  BlockQ4_0 q40[8];
  BlockQ4_1 q41[8];
  BlockQ8_0 q80[8];
  QuantizeRowQ4_0(x.data(), q40, 256);
  QuantizeRowQ4_1(x.data(), q41, 256);
  QuantizeRowQ8_0(x.data(), q80, 256);
  float y40[256], y41[256], y80[256];
  DequantQ4_0(q40, y40, 256);
  DequantQ4_1(q41, y41, 256);
  DequantQ8_0(q80, y80, 256);
  for (int i = 0; i < 256; ++i) {
    const int b = i / 32;
    // Half a step plus the f16 rounding of the scale (and min) times |q|.
    // Q4_0 clamps the extreme opposite the signed max to 7 steps: up to a full step.
    EXPECT_LE(std::fabs(y40[i] - x[i]), std::fabs(F16ToF32(q40[b].d)) * 1.01f) << i;
    EXPECT_LE(std::fabs(y41[i] - x[i]),
              F16ToF32(q41[b].d) * 0.51f + 16 * std::fabs(F16ToF32(q41[b].m)) * 1e-3f)
        << i;
    EXPECT_LE(std::fabs(y80[i] - x[i]), F16ToF32(q80[b].d) * 0.6f) << i;
  }
}

// Straight from reference/smollm2-gguf.md §2.6, reading raw bytes.
std::vector<float> ReferenceQ4K(const uint8_t* p, int64_t n) {
  std::vector<float> y;
  for (int64_t blk = 0; blk < n / 256; ++blk, p += 144) {
    const float d = F16ToF32(static_cast<uint16_t>(p[0] | p[1] << 8));
    const float dmin = F16ToF32(static_cast<uint16_t>(p[2] | p[3] << 8));
    const uint8_t* q = p + 4;
    const uint8_t* qs = p + 16;
    auto scale_min = [&](int j, int* sc, int* m) {
      if (j < 4) {
        *sc = q[j] & 63, *m = q[j + 4] & 63;
      } else {
        *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
      }
    };
    for (int c = 0; c < 4; ++c) {
      for (int half = 0; half < 2; ++half) {
        int sc, m;
        scale_min(2 * c + half, &sc, &m);
        const float ds = d * static_cast<float>(sc), dm = dmin * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) {
          const int nib = half == 0 ? (qs[32 * c + l] & 0xF) : (qs[32 * c + l] >> 4);
          y.push_back(ds * static_cast<float>(nib) - dm);
        }
      }
    }
  }
  return y;
}

std::vector<float> ReferenceQ6K(const uint8_t* p, int64_t n) {
  std::vector<float> y(n);
  for (int64_t blk = 0; blk < n / 256; ++blk, p += 210) {
    const float d = F16ToF32(static_cast<uint16_t>(p[208] | p[209] << 8));
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = p + 64 * h;
      const uint8_t* qh = p + 128 + 32 * h;
      const int8_t* sc = reinterpret_cast<const int8_t*>(p + 192 + 8 * h);
      float* out = &y[blk * 256 + 128 * h];
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q[4] = {((ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4)) - 32,
                          ((ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4)) - 32,
                          ((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32,
                          ((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32};
        for (int k = 0; k < 4; ++k) {
          out[l + 32 * k] = d * static_cast<float>(sc[is + 2 * k]) * static_cast<float>(q[k]);
        }
      }
    }
  }
  return y;
}

TEST(QuantFormatsTest, KQuantsMatchIndependentDecoder) {
  std::mt19937_64 rng(21);
  for (int trial = 0; trial < 20; ++trial) {
    for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
      const std::string w = RandomKQuantRow(t, 512, rng);
      const auto* p = reinterpret_cast<const uint8_t*>(w.data());
      const std::vector<float> want =
          t == GgmlType::kQ4_K ? ReferenceQ4K(p, 512) : ReferenceQ6K(p, 512);
      std::vector<float> got(512);
      if (t == GgmlType::kQ4_K) {
        DequantQ4_K(w.data(), got.data(), 512);
      } else {
        DequantQ6_K(w.data(), got.data(), 512);
      }
      for (int i = 0; i < 512; ++i) ASSERT_EQ(got[i], want[i]) << "type " << Id(t) << " i " << i;
    }
  }
}

TEST(QuantFormatsTest, GgmlTypeTable) {
  struct Row {
    uint32_t id;
    const char* name;
    int64_t elems, bytes;
  };
  const Row rows[] = {{0, "F32", 1, 4},       {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},
                      {3, "Q4_1", 32, 20},    {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},
                      {8, "Q8_0", 32, 34},    {9, "Q8_1", 32, 36},    {10, "Q2_K", 256, 84},
                      {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
                      {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {24, "I8", 1, 1},
                      {25, "I16", 1, 2},      {26, "I32", 1, 4},      {27, "I64", 1, 8},
                      {28, "F64", 1, 8},      {30, "BF16", 1, 2}};
  for (const Row& r : rows) {
    const GgmlTypeTraits* t = FindGgmlTypeTraits(r.id);
    ASSERT_NE(t, nullptr) << r.id;
    EXPECT_EQ(t->name, r.name);
    EXPECT_EQ(t->block_elems, r.elems);
    EXPECT_EQ(t->block_bytes, r.bytes);
    EXPECT_EQ(GgmlTypeName(r.id), r.name);
    EXPECT_EQ(GgmlRowBytes(r.id, 576 * r.elems), 576 * r.bytes);
    EXPECT_EQ(GgmlRowBytes(r.id, 0), 0);
    if (r.elems > 1) EXPECT_EQ(GgmlRowBytes(r.id, r.elems + 1), -1);
  }
  for (uint32_t id : {4u, 5u, 16u, 31u, 34u, 1000u}) {
    EXPECT_EQ(FindGgmlTypeTraits(id), nullptr) << id;
    EXPECT_EQ(GgmlRowBytes(id, 256), -1);
    EXPECT_NE(GgmlTypeName(id).find(std::to_string(id)), std::string::npos);
  }
  EXPECT_EQ(GgmlRowBytes(0, -4), -1);
  // SmolLM2: a Q4_1 row of 576 is 18 blocks of 20 bytes; a Q8_0 row 18 of 34.
  EXPECT_EQ(GgmlRowBytes(Id(GgmlType::kQ4_1), 576), 360);
  EXPECT_EQ(GgmlRowBytes(Id(GgmlType::kQ8_0), 576), 612);
}

}  // namespace
}  // namespace pdserve
