// Kernel tests: every weight type's dequant / quantize_act / vec_dot(4)
// against double-precision references, on every ISA this CPU supports.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/quant/dequantize.h"
#include "common/gguf/ggml_type.h"
#include "common/quant/half.h"
#include "common/quant/kernels.h"
#include "common/quant/quant_blocks.h"
#include "common/quant/quantize_activations.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

constexpr GgmlType kWeightTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16,
                                     GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                                     GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ4_K,
                                     GgmlType::kQ5_K, GgmlType::kQ6_K};

uint32_t Id(GgmlType t) { return static_cast<uint32_t>(t); }

GgmlType ExpectedActType(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ8_0:
      return GgmlType::kQ8_0;
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
      return GgmlType::kQ8_1;
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return GgmlType::kQ8_K;
    default:
      return t;
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
    case GgmlType::kF32:
      QuantizeRowF32(x.data(), out.data(), n);
      break;
    case GgmlType::kF16:
      QuantizeRowF16(x.data(), out.data(), n);
      break;
    case GgmlType::kBF16:
      QuantizeRowBf16(x.data(), out.data(), n);
      break;
    case GgmlType::kQ4_0:
      QuantizeRowQ4_0(x.data(), out.data(), n);
      break;
    case GgmlType::kQ4_1:
      QuantizeRowQ4_1(x.data(), out.data(), n);
      break;
    case GgmlType::kQ8_0:
      QuantizeRowQ8_0(x.data(), out.data(), n);
      break;
    case GgmlType::kQ4_K: {
      out = RandomBytesBlocks<BlockQ4_K>(n / kQKK, rng);
      auto* b = reinterpret_cast<BlockQ4_K*>(out.data());
      for (int64_t i = 0; i < n / kQKK; ++i) b[i].d = SmallF16(rng), b[i].dmin = SmallF16(rng);
      break;
    }
    case GgmlType::kQ5_0: {
      out = RandomBytesBlocks<BlockQ5_0>(n / kQK, rng);
      auto* b = reinterpret_cast<BlockQ5_0*>(out.data());
      for (int64_t i = 0; i < n / kQK; ++i) b[i].d = SmallF16(rng);
      break;
    }
    case GgmlType::kQ5_1: {
      out = RandomBytesBlocks<BlockQ5_1>(n / kQK, rng);
      auto* b = reinterpret_cast<BlockQ5_1*>(out.data());
      for (int64_t i = 0; i < n / kQK; ++i) b[i].d = SmallF16(rng), b[i].m = SmallF16(rng);
      break;
    }
    case GgmlType::kQ5_K: {
      out = RandomBytesBlocks<BlockQ5_K>(n / kQKK, rng);
      auto* b = reinterpret_cast<BlockQ5_K*>(out.data());
      for (int64_t i = 0; i < n / kQKK; ++i) b[i].d = SmallF16(rng), b[i].dmin = SmallF16(rng);
      break;
    }
    case GgmlType::kQ6_K: {
      out = RandomBytesBlocks<BlockQ6_K>(n / kQKK, rng);
      auto* b = reinterpret_cast<BlockQ6_K*>(out.data());
      for (int64_t i = 0; i < n / kQKK; ++i) b[i].d = SmallF16(rng);
      break;
    }
    default:
      ADD_FAILURE() << "no generator for type " << Id(type);
  }
  return out;
}

std::vector<float> DequantAct(GgmlType act, const void* a, int64_t n) {
  std::vector<float> out(n);
  switch (act) {
    case GgmlType::kF32:
      DequantF32(a, out.data(), n);
      break;
    case GgmlType::kF16:
      DequantF16(a, out.data(), n);
      break;
    case GgmlType::kBF16:
      DequantBf16(a, out.data(), n);
      break;
    case GgmlType::kQ8_0:
      DequantQ8_0(a, out.data(), n);
      break;
    case GgmlType::kQ8_1:
      DequantQ8_1(a, out.data(), n);
      break;
    case GgmlType::kQ8_K:
      DequantQ8_K(a, out.data(), n);
      break;
    default:
      ADD_FAILURE() << "no activation dequant for " << Id(act);
  }
  return out;
}

// Allowed |vec_dot - exact dot of the dequantised rows|: float summation
// error, plus, for Q4_1/Q5_1 x Q8_1, the f16 rounding of the activation block sum
// s = d * sum(q) that the min term uses instead of sum(d * q).
double Tolerance(GgmlType type, const std::string& w, const std::string& a,
                 const std::vector<float>& wf, const std::vector<float>& af) {
  double abs_sum = 0.0;
  for (size_t i = 0; i < wf.size(); ++i) abs_sum += std::fabs(static_cast<double>(wf[i]) * af[i]);
  double tol = 2e-5 * abs_sum + 1e-30;
  if (type == GgmlType::kQ4_1 || type == GgmlType::kQ5_1) {
    const auto* y = reinterpret_cast<const BlockQ8_1*>(a.data());
    for (size_t i = 0; i < wf.size() / kQK; ++i) {
      // Both blocks keep their f16 min at offset 2.
      uint16_t m;
      std::memcpy(&m, w.data() + i * GgmlRowBytes(Id(type), kQK) + 2, sizeof(m));
      double sum_q = 0.0;
      for (int j = 0; j < kQK; ++j) sum_q += y[i].qs[j];
      tol += std::fabs(F16ToF32(m) * F16ToF32(y[i].d) * sum_q) * std::ldexp(1.0, -9);
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
    for (GgmlType t : {GgmlType::kQ3_K, GgmlType::kQ8_1, GgmlType::kQ8_K, GgmlType::kI32}) {
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

// The multi-token kernels are the one-token kernel, bit for bit, for every
// token count (whole tiles, a partial last tile, one token) and strided
// activation and output rows.
TEST(QuantKernelsTest, VecDotTokensEqualsVecDotBitwise) {
  constexpr int64_t kN = 768;  // 3 K-quant super-blocks, 24 legacy blocks
  int checked = 0;
  for (KernelIsa isa : SupportedIsas()) {
    ScopedIsa scoped(isa);
    for (GgmlType t : kWeightTypes) {
      const TypeKernels* k = FindTypeKernels(Id(t));
      ASSERT_NE(k, nullptr);
      if (k->vec_dot_tokens == nullptr) continue;
      SCOPED_TRACE(testing::Message() << "isa " << static_cast<int>(isa) << " type " << Id(t));
      std::mt19937_64 rng(300 + Id(t));
      const std::string w = RandomWeightRow(t, kN, rng);
      const int64_t act_bytes = ActivationRowBytes(Id(t), kN);
      const int64_t a_stride = act_bytes + 48;
      for (int64_t tokens : {1, 2, 3, 4, 5, 8, 9, 17}) {
        std::string acts(tokens * a_stride, '\0');
        for (int64_t i = 0; i < tokens; ++i) {
          const std::vector<float> x = RandomFloats(kN, rng, i % 2 ? 0.02f : 4.0f);
          k->quantize_act(x.data(), acts.data() + i * a_stride, kN);
        }
        constexpr int64_t kOutStride = 3;
        std::vector<float> out(tokens * kOutStride, -1.0f);
        k->vec_dot_tokens(kN, w.data(), acts.data(), a_stride, tokens, out.data(), kOutStride);
        for (int64_t i = 0; i < tokens; ++i) {
          const float want = k->vec_dot(kN, w.data(), acts.data() + i * a_stride);
          EXPECT_EQ(out[i * kOutStride], want) << tokens << " tokens, token " << i;
          EXPECT_EQ(out[i * kOutStride + 1], -1.0f) << "wrote between outputs";
        }
      }
      ++checked;
    }
  }
  // Q5_0, Q4_K, Q5_K and Q6_K on each SIMD ISA; none on scalar-only CPUs.
  if (CpuSupportsAvx2()) EXPECT_GE(checked, 4);
}

// llama.cpp's float order for the K-quants its x86 build runs (the models
// below are written out lane by lane from ggml-cpu's arch/x86 sources as
// llama-cpp-python 0.3.36 vendors them). The integer sums are exact in any
// order; these pin where the floats round.

// get_scale_min_k4: sub-block j's 6-bit scale and min.
void ScaleMinK4(int j, const uint8_t* q, int* d, int* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// ggml_gemv_q4_K_8x8_q8_K, one output row: per super-block the scaled
// products and the mins as exact integers, each into its own float sum by
// one FMA with (block scale x activation scale); subtracted at the end.
float ModelQ4_K(const BlockQ4_K* x, const BlockQ8_K* y, int64_t nb) {
  float acc = 0.0f, mins = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int64_t sum = 0, msum = 0;
    for (int s = 0; s < 8; ++s) {
      int sc, m;
      ScaleMinK4(s, x[i].scales, &sc, &m);
      int dot = 0;
      for (int l = 0; l < 32; ++l) {
        const uint8_t b = x[i].qs[32 * (s / 2) + l];
        dot += (s % 2 ? b >> 4 : b & 0xF) * y[i].qs[32 * s + l];
      }
      sum += static_cast<int64_t>(sc) * dot;
      msum += static_cast<int64_t>(m) * (y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]);
    }
    acc = std::fma(static_cast<float>(sum), F16ToF32(x[i].d) * y[i].d, acc);
    mins = std::fma(static_cast<float>(msum), F16ToF32(x[i].dmin) * y[i].d, mins);
  }
  return acc - mins;
}

// ggml_vec_dot_q6_K_q8_K (AVX2): eight int32 lanes per super-block (lane k
// holds elements 4k..4k+3 of each 32-element chunk, less 32 x the offsets
// of groups 2k and 2k+1), each accumulated by an FMA, then hsum_float_8.
float ModelQ6_K(const BlockQ6_K* x, const BlockQ8_K* y, int64_t nb) {
  float acc[8] = {};
  for (int64_t i = 0; i < nb; ++i) {
    int32_t lane[8] = {};
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = x[i].ql[64 * h + l], hi = x[i].ql[64 * h + 32 + l];
        const uint8_t qh = x[i].qh[32 * h + l];
        const int q[4] = {(lo & 0xF) | ((qh & 3) << 4), (hi & 0xF) | (((qh >> 2) & 3) << 4),
                          (lo >> 4) | (((qh >> 4) & 3) << 4), (hi >> 4) | (((qh >> 6) & 3) << 4)};
        for (int k = 0; k < 4; ++k) {
          const int sc = x[i].scales[8 * h + 2 * k + l / 16];
          lane[l / 4] += sc * q[k] * y[i].qs[128 * h + 32 * k + l];
        }
      }
    }
    const float d = y[i].d * F16ToF32(x[i].d);
    for (int k = 0; k < 8; ++k) {
      lane[k] -= 32 * (y[i].bsums[2 * k] * x[i].scales[2 * k] +
                       y[i].bsums[2 * k + 1] * x[i].scales[2 * k + 1]);
      acc[k] = std::fma(d, static_cast<float>(lane[k]), acc[k]);
    }
  }
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

TEST(QuantKernelsTest, KQuantDotsFollowLlamaCppOrderBitwise) {
  constexpr int64_t kN = 2048;  // 8 super-blocks: enough sums for orders to matter
  int checked = 0;
  for (KernelIsa isa : SupportedIsas()) {
    if (isa == KernelIsa::kScalar) continue;  // portable sums, other orders
    ScopedIsa scoped(isa);
    for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
      SCOPED_TRACE(testing::Message() << "isa " << static_cast<int>(isa) << " type " << Id(t));
      const TypeKernels* k = FindTypeKernels(Id(t));
      std::mt19937_64 rng(500 + Id(t));
      for (int trial = 0; trial < 50; ++trial) {
        const std::string w = RandomWeightRow(t, kN, rng);
        const std::vector<float> x = RandomFloats(kN, rng, trial % 2 ? 0.05f : 5.0f);
        std::string a(ActivationRowBytes(Id(t), kN), '\0');
        k->quantize_act(x.data(), a.data(), kN);
        const auto* y = reinterpret_cast<const BlockQ8_K*>(a.data());
        const float want =
            t == GgmlType::kQ4_K
                ? ModelQ4_K(reinterpret_cast<const BlockQ4_K*>(w.data()), y, kN / kQKK)
                : ModelQ6_K(reinterpret_cast<const BlockQ6_K*>(w.data()), y, kN / kQKK);
        EXPECT_EQ(k->vec_dot(kN, w.data(), a.data()), want) << "trial " << trial;
        ++checked;
      }
    }
  }
  if (CpuSupportsAvx2()) EXPECT_GE(checked, 100);
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
  // The largest magnitude twice with opposite signs: Q8_K's scale takes the
  // sign of the first, so a vector maximum must still find that one.
  std::vector<float> twins = RandomFloats(n, rng);
  for (int64_t i = 0; i + 256 <= n; i += 256) {
    const float sign = (i / 256) % 2 == 0 ? 1.0f : -1.0f;
    twins[i + 37] = -20.0f * sign;
    twins[i + 200] = 20.0f * sign;
  }
  rows.push_back(twins);
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

}  // namespace
}  // namespace pdserve
