// Packed (row-interleaved) matmul against the row-by-row kernels: for random
// Q4_1, Q8_0, Q5_0, Q4_K and Q6_K matrices of odd shapes (partial row groups,
// one block, many) and every token count a step can have (every tile tail), Matmul with packed weights must give exactly the active ISA's
// vec_dot results (the summation order llama.cpp uses, which the golden test
// relies on) and the scalar reference's up to float summation order, on
// every ISA this CPU supports.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/base/thread_pool.h"
#include "common/cpu/matmul.h"
#include "common/cpu/packed_weights.h"
#include "common/model/model_weights.h"
#include "common/gguf/ggml_type.h"
#include "common/quant/half.h"
#include "common/quant/kernels.h"
#include "common/quant/quant_blocks.h"
#include "gtest/gtest.h"
#include "tests/testing/random_weight_matrix.h"

namespace pdserve {
namespace {

uint32_t Id(GgmlType t) { return static_cast<uint32_t>(t); }

std::vector<KernelIsa> SupportedIsas() {
  std::vector<KernelIsa> isas = {KernelIsa::kScalar};
  if (CpuSupportsAvx2()) isas.push_back(KernelIsa::kAvx2);
  if (CpuSupportsAvx512Vnni()) isas.push_back(KernelIsa::kAvx512Vnni);
  return isas;
}

class ScopedIsa {
 public:
  explicit ScopedIsa(KernelIsa isa) : saved_(ActiveKernelIsa()) { ForceKernelIsaForTesting(isa); }
  ~ScopedIsa() { ForceKernelIsaForTesting(saved_); }

 private:
  KernelIsa saved_;
};

using RandomMatrix = testing::RandomWeightMatrix;

// Activations with some all-zero blocks (d = 0) and some large values.
std::vector<float> RandomInput(int64_t n_tokens, int64_t in, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tokens * in));
  for (float& v : x) v = dist(rng);
  for (int64_t t = 0; t < n_tokens; t += 3) {
    for (int j = 0; j < kQK; ++j) x[t * in + j] = 0.0f;
  }
  if (!x.empty()) x[x.size() / 2] = 40.0f;
  return x;
}

// y[t][r] from `k`'s row-by-row kernels.
std::vector<float> RowByRow(const TypeKernels& k, const WeightMatrix& w,
                            const std::vector<float>& x, int64_t n_tokens) {
  std::vector<uint8_t> act(static_cast<size_t>(ActivationRowBytes(w.type, w.in)));
  std::vector<float> y(static_cast<size_t>(n_tokens * w.out));
  for (int64_t t = 0; t < n_tokens; ++t) {
    k.quantize_act(&x[t * w.in], act.data(), w.in);
    for (int64_t r = 0; r < w.out; ++r) y[t * w.out + r] = k.vec_dot(w.in, w.row(r), act.data());
  }
  return y;
}

// sum_i |w[r][i]| * |x[t][i]| per output: the scale of its rounding error.
std::vector<double> Magnitudes(const WeightMatrix& w, const std::vector<float>& x,
                               int64_t n_tokens) {
  std::vector<float> row(static_cast<size_t>(w.in));
  std::vector<double> m(static_cast<size_t>(n_tokens * w.out), 0.0);
  for (int64_t r = 0; r < w.out; ++r) {
    kernels_scalar::Find(w.type)->dequant(w.row(r), row.data(), w.in);
    for (int64_t t = 0; t < n_tokens; ++t) {
      double sum = 0.0;
      for (int64_t i = 0; i < w.in; ++i) sum += std::fabs(row[i]) * std::fabs(x[t * w.in + i]);
      m[t * w.out + r] = sum;
    }
  }
  return m;
}

// Checks y against the scalar reference (to rounding) and the active ISA's
// own vec_dot (exactly).
void ExpectMatches(const WeightMatrix& w, const std::vector<float>& x, int64_t n_tokens,
                   const float* y, const std::string& what) {
  const std::vector<float> scalar = RowByRow(*kernels_scalar::Find(w.type), w, x, n_tokens);
  const std::vector<float> active = RowByRow(*FindTypeKernels(w.type), w, x, n_tokens);
  const std::vector<double> magnitude = Magnitudes(w, x, n_tokens);
  for (size_t i = 0; i < scalar.size(); ++i) {
    ASSERT_NEAR(y[i], scalar[i], 1e-5 * magnitude[i] + 1e-6) << what << " output " << i;
    ASSERT_EQ(y[i], active[i]) << what << " output " << i;
  }
}

struct Shape {
  GgmlType type;
  int64_t in, out;
};

class PackedMatmulTest : public ::testing::TestWithParam<KernelIsa> {};

TEST_P(PackedMatmulTest, MatchesScalarReference) {
  ScopedIsa isa(GetParam());
  std::mt19937_64 rng(7);
  const Shape shapes[] = {{GgmlType::kQ4_1, 32, 1},   {GgmlType::kQ4_1, 96, 37},
                          {GgmlType::kQ4_1, 576, 16}, {GgmlType::kQ4_1, 160, 50},
                          {GgmlType::kQ8_0, 64, 5},   {GgmlType::kQ8_0, 96, 33},
                          {GgmlType::kQ8_0, 576, 24}, {GgmlType::kQ5_0, 32, 3},
                          {GgmlType::kQ5_0, 896, 21}, {GgmlType::kQ5_0, 640, 32},
                          {GgmlType::kQ4_K, 256, 7},  {GgmlType::kQ4_K, 768, 35},
                          {GgmlType::kQ6_K, 256, 16}, {GgmlType::kQ6_K, 512, 19}};
  for (const Shape& s : shapes) {
    const RandomMatrix m(s.type, s.in, s.out, rng);
    const PackedMatrix packed = PackedMatrix::Pack(m.w);
    ASSERT_FALSE(packed.empty());
    // Every packed layout has an AVX-512 kernel: this test must reach it.
    if (GetParam() == KernelIsa::kAvx512Vnni) {
      ASSERT_NE(FindTypeKernels(Id(s.type))->packed_gemm, nullptr) << Id(s.type);
    }
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      Matmul matmul(&pool);
      for (int64_t n_tokens = 1; n_tokens <= 70; n_tokens += (n_tokens < 12 ? 1 : 7)) {
        const std::vector<float> x = RandomInput(n_tokens, s.in, rng);
        const size_t n_out = static_cast<size_t>(n_tokens * s.out);
        // Sentinels after the output catch stores past the last row.
        std::vector<float> y(n_out + 16, -7.0f);
        const MatmulJob job[] = {{&m.w, y.data(), &packed}};
        matmul.Run(job, x.data(), n_tokens);
        ExpectMatches(m.w, x, n_tokens, y.data(),
                      "type " + std::to_string(Id(s.type)) + " " + std::to_string(s.in) + "x" +
                          std::to_string(s.out) + " tokens " + std::to_string(n_tokens) +
                          " threads " + std::to_string(threads));
        for (size_t i = n_out; i < y.size(); ++i) ASSERT_EQ(y[i], -7.0f);
      }
    }
  }
}

// Jobs of different types and packing in one Run share the row split.
TEST_P(PackedMatmulTest, MixedJobsInOneRun) {
  ScopedIsa isa(GetParam());
  std::mt19937_64 rng(11);
  const int64_t in = 128;
  const RandomMatrix a(GgmlType::kQ4_1, in, 45, rng);
  const RandomMatrix b(GgmlType::kQ8_0, in, 19, rng);
  const RandomMatrix c(GgmlType::kQ4_1, in, 21, rng);  // not packed
  const PackedMatrix pa = PackedMatrix::Pack(a.w), pb = PackedMatrix::Pack(b.w);
  ThreadPool pool(2);
  Matmul matmul(&pool);
  for (int64_t n_tokens : {1, 4, 9, 33}) {
    const std::vector<float> x = RandomInput(n_tokens, in, rng);
    std::vector<float> ya(n_tokens * 45), yb(n_tokens * 19), yc(n_tokens * 21);
    const MatmulJob jobs[] = {
        {&a.w, ya.data(), &pa}, {&b.w, yb.data(), &pb}, {&c.w, yc.data(), nullptr}};
    matmul.Run(jobs, x.data(), n_tokens);
    ExpectMatches(a.w, x, n_tokens, ya.data(), "a");
    ExpectMatches(b.w, x, n_tokens, yb.data(), "b");
    ExpectMatches(c.w, x, n_tokens, yc.data(), "c");
  }
}

TEST(PackedMatrixTest, LayoutsExistForTheKernelTypes) {
  std::mt19937_64 rng(3);
  for (GgmlType t : {GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ5_0, GgmlType::kQ4_K,
                     GgmlType::kQ6_K}) {
    EXPECT_TRUE(PackedMatrix::HasLayout(Id(t))) << Id(t);
  }
  EXPECT_FALSE(PackedMatrix::HasLayout(Id(GgmlType::kQ4_0)));
  EXPECT_FALSE(PackedMatrix::HasLayout(Id(GgmlType::kQ5_K)));
  EXPECT_FALSE(PackedMatrix::HasLayout(Id(GgmlType::kF32)));
  const RandomMatrix m(GgmlType::kQ4_1, 64, 17, rng);
  const PackedMatrix p = PackedMatrix::Pack(m.w);
  EXPECT_EQ(p.n_groups(), 2);
  EXPECT_EQ(p.n_blocks(), 2);
  EXPECT_EQ(p.bytes(), 2 * 2 * kPackedRows * 20);
}

std::string IsaName(const ::testing::TestParamInfo<KernelIsa>& info) {
  return KernelIsaName(info.param);
}

INSTANTIATE_TEST_SUITE_P(AllIsas, PackedMatmulTest, ::testing::ValuesIn(SupportedIsas()), IsaName);

}  // namespace
}  // namespace pdserve
