// Every packed many-token kernel variant (AVX-512, AVX2 + AVX-VNNI, plain
// AVX2) that this CPU runs, called directly on random Q5_0, Q4_K and Q6_K
// matrices (and Q8_0 on AVX-512): each output must equal the one-token vec_dot bit for bit, for
// partial row groups (1..33 rows), one or many blocks, and every token
// count up to past two panels' worth of tile tails. Values cover each
// format's full range, activations include -128 (Q8_K) and all-zero blocks.
#include "common/quant/packed_gemm.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/gguf/ggml_type.h"
#include "common/model/model_weights.h"
#include "common/quant/half.h"
#include "common/quant/kernels.h"
#include "common/quant/packed_layout.h"
#include "common/quant/quant_blocks.h"
#include "gtest/gtest.h"
#include "tests/testing/random_weight_matrix.h"

namespace pdserve {
namespace {

uint32_t Id(GgmlType t) { return static_cast<uint32_t>(t); }

// Small scales keep every sum far from f32 overflow.
testing::RandomWeightMatrix RandomMatrix(GgmlType type, int64_t in, int64_t out,
                                         std::mt19937_64& rng) {
  return testing::RandomWeightMatrix(type, in, out, rng, 0.0005f, 0.02f);
}

// `w` in the packed layout (what PackedMatrix holds), zero past the last row.
std::vector<uint8_t> Pack(const WeightMatrix& w, int64_t n_groups, int64_t n_blocks) {
  const PackedLayout layout = PackedLayoutOf(w.type);
  std::vector<uint8_t> out(static_cast<size_t>(n_groups * n_blocks * layout.block_bytes), 0);
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* rows[kPackedRows];
    for (int r = 0; r < kPackedRows; ++r) {
      rows[r] = g * kPackedRows + r < w.out ? w.row(g * kPackedRows + r) : nullptr;
    }
    for (int64_t b = 0; b < n_blocks; ++b) {
      PackBlock(w.type, rows, b, out.data() + (g * n_blocks + b) * layout.block_bytes);
    }
  }
  return out;
}

// Quantised activations and the per-block scalars a packed kernel reads,
// built the way common/cpu/matmul.cc builds them.
struct Activations {
  int64_t row_bytes = 0;
  std::vector<uint8_t> data;
  std::vector<float> d;
  std::vector<int32_t> offsets;

  Activations(const TypeKernels& k, int64_t in, int64_t n_tokens, std::mt19937_64& rng) {
    const int32_t bias = PackedSliceBias(static_cast<uint32_t>(k.weight_type));
    row_bytes = GgmlRowBytes(static_cast<uint32_t>(k.act_type), in);
    data.resize(static_cast<size_t>(row_bytes * n_tokens));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(in));
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (float& v : x) v = dist(rng);
      if (t % 4 == 1) {
        for (int j = 0; j < kQK; ++j) x[j] = 0.0f;  // a zero block: d = 0
      }
      x[static_cast<size_t>(t) % x.size()] = -50.0f;  // the Q8_K minimum, -128
      k.quantize_act(x.data(), data.data() + t * row_bytes, in);
    }
    if (k.act_type != GgmlType::kQ8_0) return;
    const int64_t n_blocks = in / kQK;
    for (int64_t t = 0; t < n_tokens; ++t) {
      const auto* blk = reinterpret_cast<const BlockQ8_0*>(data.data() + t * row_bytes);
      for (int64_t b = 0; b < n_blocks; ++b) {
        d.push_back(F16ToF32(blk[b].d));
        for (int g = 0; g < kQK / 4; ++g) {
          const int8_t* q = blk[b].qs + 4 * g;
          offsets.push_back(-bias * (q[0] + q[1] + q[2] + q[3]));
        }
      }
    }
  }
};

struct Shape {
  GgmlType type;
  int64_t in, out;
};

class PackedGemmTest : public ::testing::TestWithParam<PackedVariant> {};

TEST_P(PackedGemmTest, EqualsVecDotBitwise) {
  if (!CpuSupportsPackedVariant(GetParam())) {
    GTEST_SKIP() << "this CPU does not run " << PackedVariantName(GetParam());
  }
  if (!CpuSupportsAvx2()) GTEST_SKIP() << "no AVX2 one-token kernels to compare with";
  std::mt19937_64 rng(42);
  const Shape shapes[] = {{GgmlType::kQ5_0, 32, 1},
                          {GgmlType::kQ5_0, 160, 33},
                          {GgmlType::kQ5_0, 896, 16},
                          {GgmlType::kQ4_K, 256, 9},
                          {GgmlType::kQ4_K, 1280, 17},
                          {GgmlType::kQ6_K, 256, 24},
                          {GgmlType::kQ6_K, 768, 5},
                          {GgmlType::kQ8_0, 64, 17},
                          {GgmlType::kQ8_0, 896, 32},
                          // More row groups than one panel holds on any CPU
                          // (PackedPanelWeightBytes <= 768 KiB).
                          {GgmlType::kQ5_0, 896, 1000},
                          {GgmlType::kQ6_K, 768, 1000}};
  for (const Shape& s : shapes) {
    const testing::RandomWeightMatrix m = RandomMatrix(s.type, s.in, s.out, rng);
    const PackedLayout layout = PackedLayoutOf(Id(s.type));
    const int64_t n_groups = (s.out + kPackedRows - 1) / kPackedRows;
    const int64_t n_blocks = s.in / layout.block_elems;
    const std::vector<uint8_t> packed = Pack(m.w, n_groups, n_blocks);
    const PackedGemmFn gemm = FindPackedGemm(GetParam(), Id(s.type));
    // Q8_0 has its AVX2 kernel in the vec_dot tables (packed_matmul_test).
    if (s.type == GgmlType::kQ8_0 && GetParam() != PackedVariant::kAvx512) continue;
    ASSERT_NE(gemm, nullptr);
    // The one-token kernels have the same float order on AVX2 and AVX-512.
    const TypeKernels& k = *FindTypeKernels(Id(s.type));
    for (int64_t n_tokens : {1, 2, 3, 4, 5, 6, 7, 8, 11, 13, 16, 17, 130, 263}) {
      const Activations act(k, s.in, n_tokens, rng);
      PackedGemmArgs args;
      args.w = packed.data();
      args.n_groups = n_groups;
      args.n_rows = s.out;
      args.n_blocks = n_blocks;
      args.act = act.data.data();
      args.act_stride = act.row_bytes;
      args.act_d = act.d.empty() ? nullptr : act.d.data();
      args.act_s = nullptr;
      args.act_offsets = act.offsets.empty() ? nullptr : act.offsets.data();
      args.n_tokens = n_tokens;
      // Rows padded to whole groups; the padding must stay untouched.
      const int64_t ldy = n_groups * kPackedRows + 3;
      std::vector<float> y(static_cast<size_t>(n_tokens * ldy), -7.0f);
      args.y = y.data();
      args.ldy = ldy;
      gemm(args);
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t r = 0; r < ldy; ++r) {
          const float got = y[t * ldy + r];
          if (r >= s.out) {
            ASSERT_EQ(got, -7.0f) << "store past the last row " << r;
            continue;
          }
          const float want = k.vec_dot(s.in, m.w.row(r), act.data.data() + t * act.row_bytes);
          ASSERT_EQ(got, want) << PackedVariantName(GetParam()) << " type " << Id(s.type) << " "
                               << s.in << "x" << s.out << " tokens " << n_tokens << " row " << r
                               << " token " << t;
        }
      }
    }
  }
}

// Panels take half the L2 (read once per core), never less than 128 KiB
// nor more than 768 KiB; an unknown L2 counts as 512 KiB.
TEST(PackedPanelTest, HalfTheL2WithinBounds) {
  constexpr int64_t kKiB = 1024;
  EXPECT_EQ(PanelWeightBytesForL2(512 * kKiB), 256 * kKiB);   // Zen 3
  EXPECT_EQ(PanelWeightBytesForL2(1024 * kKiB), 512 * kKiB);  // Zen 4/5
  EXPECT_EQ(PanelWeightBytesForL2(2048 * kKiB), 768 * kKiB);  // Sapphire Rapids
  EXPECT_EQ(PanelWeightBytesForL2(128 * kKiB), 128 * kKiB);
  EXPECT_EQ(PanelWeightBytesForL2(0), 256 * kKiB);
  EXPECT_EQ(PanelWeightBytesForL2(-1), 256 * kKiB);
  const int64_t here = PackedPanelWeightBytes();
  EXPECT_GE(here, 128 * kKiB);
  EXPECT_LE(here, 768 * kKiB);
}

INSTANTIATE_TEST_SUITE_P(Variants, PackedGemmTest,
                         ::testing::Values(PackedVariant::kAvx2, PackedVariant::kAvxVnni,
                                           PackedVariant::kAvx512),
                         [](const ::testing::TestParamInfo<PackedVariant>& info) {
                           return std::string(PackedVariantName(info.param));
                         });

}  // namespace
}  // namespace pdserve
