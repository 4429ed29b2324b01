// Kernel tests: every weight type's dequant / quantize_act / vec_dot(4)
// against double-precision references, on every ISA this CPU supports.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/ggml_type.h"
#include "common/half.h"
#include "common/quant/dequantize.h"
#include "common/quant/kernels.h"
#include "common/quant/quant_blocks.h"
#include "common/quant/quantize_activations.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

constexpr GgmlType kWeightTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16,
                                     GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0,
                                     GgmlType::kQ4_K, GgmlType::kQ6_K};

uint32_t Id(GgmlType t) { return static_cast<uint32_t>(t); }

GgmlType ExpectedActType(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_0: case GgmlType::kQ8_0: return GgmlType::kQ8_0;
    case GgmlType::kQ4_1: return GgmlType::kQ8_1;
    case GgmlType::kQ4_K: case GgmlType::kQ6_K: return GgmlType::kQ8_K;
    default: return t;
  }
}

std::vector<KernelIsa> SupportedIsas() {
  std::vector<KernelIsa> isas = {KernelIsa::kScalar};
  if (CpuSupportsAvx2()) isas.push_back(KernelIsa::kAvx2);
  if (CpuSupportsAvx512Vnni()) isas.push_back(KernelIsa::kAvx512Vnni);
  return isas;
}

// Forces an ISA for the scope of a test and restores the previous one.
class ScopedIsa {
 public:
  explicit ScopedIsa(KernelIsa isa) : saved_(ActiveKernelIsa()) { ForceKernelIsaForTesting(isa); }
  ~ScopedIsa() { ForceKernelIsaForTesting(saved_); }

 private:
  KernelIsa saved_;
};

std::vector<float> RandomFloats(int64_t n, std::mt19937_64& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

uint16_t SmallF16(std::mt19937_64& rng) {
  return F32ToF16(std::uniform_real_distribution<float>(0.001f, 0.05f)(rng));
}

template <typename Block>
std::string RandomBytesBlocks(int64_t n_blocks, std::mt19937_64& rng) {
  std::string s(n_blocks * sizeof(Block), '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// A random row of `n` elements stored as `type`.
std::string RandomWeightRow(GgmlType type, int64_t n, std::mt19937_64& rng) {
  std::string out(GgmlRowBytes(Id(type), n), '\0');
  const std::vector<float> x = RandomFloats(n, rng);
  switch (type) {
    case GgmlType::kF32: QuantizeRowF32(x.data(), out.data(), n); break;
    case GgmlType::kF16: QuantizeRowF16(x.data(), out.data(), n); break;
    case GgmlType::kBF16: QuantizeRowBf16(x.data(), out.data(), n); break;
    case GgmlType::kQ4_0: QuantizeRowQ4_0(x.data(), out.data(), n); break;
    case GgmlType::kQ4_1: QuantizeRowQ4_1(x.data(), out.data(), n); break;
    case GgmlType::kQ8_0: QuantizeRowQ8_0(x.data(), out.data(), n); break;
    case GgmlType::kQ4_K: {
      out = RandomBytesBlocks<BlockQ4_K>(n / kQKK, rng);
      auto* b = reinterpret_cast<BlockQ4_K*>(out.data());
      for (int64_t i = 0; i < n / kQKK; ++i) b[i].d = SmallF16(rng), b[i].dmin = SmallF16(rng);
      break;
    }
    case GgmlType::kQ6_K: {
      out = RandomBytesBlocks<BlockQ6_K>(n / kQKK, rng);
      auto* b = reinterpret_cast<BlockQ6_K*>(out.data());
      for (int64_t i = 0; i < n / kQKK; ++i) b[i].d = SmallF16(rng);
      break;
    }
    default: ADD_FAILURE() << "no generator for type " << Id(type);
  }
  return out;
}

std::vector<float> DequantAct(GgmlType act, const void* a, int64_t n) {
  std::vector<float> out(n);
  switch (act) {
    case GgmlType::kF32: DequantF32(a, out.data(), n); break;
    case GgmlType::kF16: DequantF16(a, out.data(), n); break;
    case GgmlType::kBF16: DequantBf16(a, out.data(), n); break;
    case GgmlType::kQ8_0: DequantQ8_0(a, out.data(), n); break;
    case GgmlType::kQ8_1: DequantQ8_1(a, out.data(), n); break;
    case GgmlType::kQ8_K: DequantQ8_K(a, out.data(), n); break;
    default: ADD_FAILURE() << "no activation dequant for " << Id(act);
  }
  return out;
}

// Allowed |vec_dot - exact dot of the dequantised rows|: float summation
// error, plus, for Q4_1 x Q8_1, the f16 rounding of the activation block sum
// s = d * sum(q) that the min term uses instead of sum(d * q).
double Tolerance(GgmlType type, const std::string& w, const std::string& a,
                 const std::vector<float>& wf, const std::vector<float>& af) {
  double abs_sum = 0.0;
  for (size_t i = 0; i < wf.size(); ++i) abs_sum += std::fabs(static_cast<double>(wf[i]) * af[i]);
  double tol = 2e-5 * abs_sum + 1e-30;
  if (type == GgmlType::kQ4_1) {
    const auto* x = reinterpret_cast<const BlockQ4_1*>(w.data());
    const auto* y = reinterpret_cast<const BlockQ8_1*>(a.data());
    for (size_t i = 0; i < wf.size() / kQK; ++i) {
      double sum_q = 0.0;
      for (int j = 0; j < kQK; ++j) sum_q += y[i].qs[j];
      tol += std::fabs(F16ToF32(x[i].m) * F16ToF32(y[i].d) * sum_q) * std::ldexp(1.0, -9);
    }
  }
  return tol;
}

double ExactDot(const std::vector<float>& x, const std::vector<float>& y) {
  double s = 0.0;
  for (size_t i = 0; i < x.size(); ++i) s += static_cast<double>(x[i]) * y[i];
  return s;
}

TEST(QuantKernelsTest, TableEntriesMatchTypes) {
  for (KernelIsa isa : SupportedIsas()) {
    ScopedIsa scoped(isa);
    for (GgmlType t : kWeightTypes) {
      const TypeKernels* k = FindTypeKernels(Id(t));
      ASSERT_NE(k, nullptr) << Id(t);
      EXPECT_EQ(k->weight_type, t);
      EXPECT_EQ(k->act_type, ExpectedActType(t));
      EXPECT_NE(k->dequant, nullptr);
      EXPECT_NE(k->quantize_act, nullptr);
      EXPECT_NE(k->vec_dot, nullptr);
      EXPECT_EQ(ActivationRowBytes(Id(t), 512), GgmlRowBytes(Id(k->act_type), 512));
    }
    for (GgmlType t : {GgmlType::kQ5_0, GgmlType::kQ8_1, GgmlType::kQ8_K, GgmlType::kI32}) {
      EXPECT_EQ(FindTypeKernels(Id(t)), nullptr) << Id(t);
    }
    EXPECT_EQ(FindTypeKernels(4), nullptr);
    EXPECT_EQ(FindTypeKernels(1000), nullptr);
    EXPECT_EQ(ActivationRowBytes(1000, 32), -1);
  }
}

TEST(QuantKernelsTest, ForcingAnIsaSticksOrFallsBack) {
  const KernelIsa saved = ActiveKernelIsa();
  ForceKernelIsaForTesting(KernelIsa::kScalar);
  EXPECT_EQ(ActiveKernelIsa(), KernelIsa::kScalar);
  ForceKernelIsaForTesting(KernelIsa::kAvx512Vnni);
  const KernelIsa want = CpuSupportsAvx512Vnni() ? KernelIsa::kAvx512Vnni
                         : CpuSupportsAvx2()     ? KernelIsa::kAvx2
                                                 : KernelIsa::kScalar;
  EXPECT_EQ(ActiveKernelIsa(), want);
  ForceKernelIsaForTesting(saved);
}

TEST(QuantKernelsTest, VecDotMatchesDequantisedDotOnEveryIsa) {
  constexpr int64_t kN = 1024;  // 4 K-quant super-blocks, 32 legacy blocks
  constexpr int kRows = 4;
  constexpr int64_t kStridePad = 64;  // vec_dot4 rows are not packed
  for (KernelIsa isa : SupportedIsas()) {
    ScopedIsa scoped(isa);
    for (GgmlType t : kWeightTypes) {
      SCOPED_TRACE(testing::Message() << "isa " << static_cast<int>(isa) << " type " << Id(t));
      const TypeKernels* k = FindTypeKernels(Id(t));
      ASSERT_NE(k, nullptr);
      std::mt19937_64 rng(100 + Id(t));
      const int64_t row_bytes = GgmlRowBytes(Id(t), kN);
      const int64_t stride = row_bytes + kStridePad;
      std::string rows(kRows * stride, '\x5a');
      std::vector<std::vector<float>> wf(kRows, std::vector<float>(kN));
      for (int r = 0; r < kRows; ++r) {
        const std::string w = RandomWeightRow(t, kN, rng);
        std::memcpy(rows.data() + r * stride, w.data(), w.size());
        k->dequant(w.data(), wf[r].data(), kN);
      }
      for (int trial = 0; trial < 8; ++trial) {
        const std::vector<float> x = RandomFloats(kN, rng, trial % 2 ? 0.01f : 3.0f);
        std::string a(ActivationRowBytes(Id(t), kN), '\0');
        k->quantize_act(x.data(), a.data(), kN);
        const std::vector<float> af = DequantAct(k->act_type, a.data(), kN);
        float out4[kRows] = {0, 0, 0, 0};
        if (k->vec_dot4 != nullptr) k->vec_dot4(kN, rows.data(), stride, a.data(), out4);
        for (int r = 0; r < kRows; ++r) {
          const std::string w = rows.substr(r * stride, row_bytes);
          const double want = ExactDot(wf[r], af);
          const double tol = Tolerance(t, w, a, wf[r], af);
          EXPECT_NEAR(k->vec_dot(kN, w.data(), a.data()), want, tol) << "row " << r;
          if (k->vec_dot4 != nullptr) EXPECT_NEAR(out4[r], want, tol) << "dot4 row " << r;
        }
      }
    }
  }
}

// Rows that stress the activation quantisers: zeros, exact .5 ties after
// scaling, tiny and huge magnitudes, a single non-zero.
std::vector<std::vector<float>> TrickyRows(int64_t n, std::mt19937_64& rng) {
  std::vector<std::vector<float>> rows;
  rows.push_back(std::vector<float>(n, 0.0f));
  std::vector<float> ties(n), halves(n), mixed = RandomFloats(n, rng), single(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    // amax 127 -> scale 1: k + 0.5 are exact ties; amax 63.5 -> scale 2.
    ties[i] = (i % 32 == 0) ? 127.0f : static_cast<float>(i % 97) - 48.5f;
    halves[i] = (i % 32 == 5) ? -63.5f : static_cast<float>(i % 50) * 0.5f - 12.25f;
  }
  for (int64_t i = 0; i < n; i += 64) {
    for (int64_t j = i; j < i + 32 && j < n; ++j) mixed[j] = 0.0f;  // zero blocks
  }
  for (int64_t i = 32; i < n; i += 256) mixed[i] *= 1e6f;
  single[n / 2] = -3.0f;
  rows.push_back(ties);
  rows.push_back(halves);
  rows.push_back(mixed);
  rows.push_back(single);
  for (int r = 0; r < 200; ++r) rows.push_back(RandomFloats(n, rng, r % 3 == 0 ? 1e-4f : 10.0f));
  return rows;
}

TEST(QuantKernelsTest, ActivationQuantisationBitIdenticalAcrossIsas) {
  constexpr int64_t kN = 512;
  std::mt19937_64 rng(9);
  const std::vector<std::vector<float>> rows = TrickyRows(kN, rng);
  for (GgmlType t : kWeightTypes) {
    const TypeKernels* scalar = kernels_scalar::Find(Id(t));
    ASSERT_NE(scalar, nullptr);
    const int64_t bytes = ActivationRowBytes(Id(t), kN);
    for (KernelIsa isa : SupportedIsas()) {
      ScopedIsa scoped(isa);
      const TypeKernels* k = FindTypeKernels(Id(t));
      for (size_t r = 0; r < rows.size(); ++r) {
        std::string want(bytes, '\0'), got(bytes, '\x7f');
        scalar->quantize_act(rows[r].data(), want.data(), kN);
        k->quantize_act(rows[r].data(), got.data(), kN);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), bytes))
            << "type " << Id(t) << " isa " << static_cast<int>(isa) << " row " << r;
      }
    }
  }
}

TEST(QuantKernelsTest, ActivationQuantisersFollowTheFormula) {
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

TEST(QuantKernelsTest, LegacyBlocksDecodeByHand) {
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

TEST(QuantKernelsTest, WeightQuantisersRoundTripWithinHalfAStep) {
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
              F16ToF32(q41[b].d) * 0.51f + 16 * std::fabs(F16ToF32(q41[b].m)) * 1e-3f) << i;
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

TEST(QuantKernelsTest, KQuantsMatchIndependentDecoder) {
  std::mt19937_64 rng(21);
  for (int trial = 0; trial < 20; ++trial) {
    for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
      const std::string w = RandomWeightRow(t, 512, rng);
      const auto* p = reinterpret_cast<const uint8_t*>(w.data());
      const std::vector<float> want =
          t == GgmlType::kQ4_K ? ReferenceQ4K(p, 512) : ReferenceQ6K(p, 512);
      std::vector<float> got(512);
      FindTypeKernels(Id(t))->dequant(w.data(), got.data(), 512);
      for (int i = 0; i < 512; ++i) ASSERT_EQ(got[i], want[i]) << "type " << Id(t) << " i " << i;
    }
  }
}

TEST(QuantKernelsTest, GgmlTypeTable) {
  struct Row { uint32_t id; const char* name; int64_t elems, bytes; };
  const Row rows[] = {{0, "F32", 1, 4},        {1, "F16", 1, 2},        {2, "Q4_0", 32, 18},
                      {3, "Q4_1", 32, 20},     {6, "Q5_0", 32, 22},     {7, "Q5_1", 32, 24},
                      {8, "Q8_0", 32, 34},     {9, "Q8_1", 32, 36},     {10, "Q2_K", 256, 84},
                      {11, "Q3_K", 256, 110},  {12, "Q4_K", 256, 144},  {13, "Q5_K", 256, 176},
                      {14, "Q6_K", 256, 210},  {15, "Q8_K", 256, 292},  {24, "I8", 1, 1},
                      {25, "I16", 1, 2},       {26, "I32", 1, 4},       {27, "I64", 1, 8},
                      {28, "F64", 1, 8},       {30, "BF16", 1, 2}};
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
