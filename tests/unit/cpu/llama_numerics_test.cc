// Both copies of llama_numerics.h's kernels (AVX512, and AVX2 emulating it)
// against a plain scalar model of ggml's arithmetic (ggml_v_expf,
// ggml_vec_dot_f16, ggml_vec_soft_max_f32 as llama.cpp (llama-cpp-python
// 0.3.36) runs them on AVX512), written out lane by lane. They must agree bit for bit. That the
// model is llama.cpp's is checked end to end by
// tests/golden/llama_cpp_golden_test.cc.
#include "common/cpu/llama_numerics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "common/quant/half.h"
#include "common/quant/kernels.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// ggml_v_expf for one lane.
float ModelExp(float x) {
  const float shift = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, shift);
  const float n = z - shift;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
  const float u = b * b;
  const float hi = std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f);
  const float mid = std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f);
  const float lo = std::fma(0x1.ffffecp-1f, b, 1.0f);
  const float poly = std::fma(std::fma(hi, u, mid), u, lo);
  return std::ldexp(poly, static_cast<int>(n));
}

// _mm512_reduce_add_ps as GCC expands it: halves, quarters, pairs.
float ModelReduce(float v[16]) {
  for (int width = 8; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) v[l] = v[l] + v[l + width];
  }
  return v[0];
}

// ggml_vec_dot_f16 with GGML_F16_STEP 64 and four 16-lane accumulators.
float ModelDot(const float* x, const float* y, int n) {
  const int np = n & ~63;
  float acc[4][16] = {};
  for (int i = 0; i < np; i += 64) {
    for (int a = 0; a < 4; ++a) {
      for (int l = 0; l < 16; ++l) {
        acc[a][l] = std::fma(x[i + 16 * a + l], y[i + 16 * a + l], acc[a][l]);
      }
    }
  }
  float v[16];
  for (int l = 0; l < 16; ++l) v[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  double sum = ModelReduce(v);
  for (int i = np; i < n; ++i) sum += static_cast<double>(x[i] * y[i]);
  return static_cast<float>(sum);
}

float RoundF16(float x) { return F16ToF32(F32ToF16(x)); }

// llama.cpp's attention for one head over n_ctx positions (KV padded to
// 256, llama_kv_cache::get_n_kv).
std::vector<float> ModelAttend(const std::vector<float>& q, const std::vector<float>& k,
                               const std::vector<float>& v, int dh, int n_ctx, float scale) {
  const int n_pad = (n_ctx + 255) / 256 * 256;
  std::vector<float> s(n_pad, -INFINITY);
  float max = -INFINITY;
  for (int j = 0; j < n_ctx; ++j) {
    s[j] = ModelDot(&k[j * dh], q.data(), dh) * scale;
    max = std::max(max, s[j]);
  }
  double sum = 0.0;
  for (int i = 0; i < n_pad; i += 16) {
    float chunk[16];
    for (int l = 0; l < 16; ++l) chunk[l] = s[i + l] = ModelExp(s[i + l] - max);
    sum += ModelReduce(chunk);
  }
  const float inv = static_cast<float>(1.0 / sum);
  std::vector<float> p(n_pad), column(n_pad, 0.0f), out(dh);
  for (int j = 0; j < n_pad; ++j) p[j] = RoundF16(s[j] * inv);
  for (int d = 0; d < dh; ++d) {
    for (int j = 0; j < n_ctx; ++j) column[j] = v[j * dh + d];
    out[d] = ModelDot(column.data(), p.data(), n_pad);
  }
  return out;
}

// Runs each test once per copy the CPU can run: the kernel ISA picks it.
class LlamaNumericsTest : public ::testing::TestWithParam<KernelIsa> {
 protected:
  void SetUp() override {
    ForceKernelIsaForTesting(GetParam());
    const LlamaNumericsIsa want =
        GetParam() == KernelIsa::kAvx512Vnni ? LlamaNumericsIsa::kAvx512 : LlamaNumericsIsa::kAvx2;
    if (ActiveLlamaNumericsIsa() != want) GTEST_SKIP() << "this CPU cannot run that copy";
  }
  void TearDown() override { ForceKernelIsaForTesting(KernelIsa::kAvx512Vnni); }
};

INSTANTIATE_TEST_SUITE_P(Copies, LlamaNumericsTest,
                         ::testing::Values(KernelIsa::kAvx512Vnni, KernelIsa::kAvx2),
                         [](const ::testing::TestParamInfo<KernelIsa>& info) {
                           return std::string(KernelIsaName(info.param));
                         });

TEST(LlamaNumericsDispatchTest, ScalarKernelsTurnTheExactCopiesOff) {
  ForceKernelIsaForTesting(KernelIsa::kScalar);
  EXPECT_EQ(ActiveLlamaNumericsIsa(), LlamaNumericsIsa::kNone);
  EXPECT_FALSE(LlamaExactNumericsActive());
  ForceKernelIsaForTesting(KernelIsa::kAvx512Vnni);
}

TEST_P(LlamaNumericsTest, SiluMatchesModelBitwise) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  const int rows = 3, n = 16 * 40 + 7;  // 7 leftovers per row take scalar expf
  std::vector<float> gate(rows * n), up(rows * n);
  for (float& x : gate) x = normal(rng);
  for (float& x : up) x = normal(rng);
  // Saturation and extremes of the exp range.
  const float special[] = {0.0f,    -0.0f,  88.0f,   -88.0f, 103.0f,  -103.0f,  150.0f,
                           -150.0f, 300.0f, -300.0f, 1e-30f, -1e-30f, INFINITY, -INFINITY};
  std::copy(std::begin(special), std::end(special), gate.begin() + 3);
  std::vector<float> want(gate.size());
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < n; ++i) {
      const float x = gate[r * n + i];
      const float e = i < n / 16 * 16 ? ModelExp(0.0f - x) : std::exp(-x);
      want[r * n + i] = (x / (1.0f + e)) * up[r * n + i];
    }
  }
  LlamaSiluMulRows(gate.data(), up.data(), rows, n);
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(gate[i])) << i;
    } else {
      EXPECT_EQ(Bits(gate[i]), Bits(want[i])) << i << ": " << gate[i] << " vs " << want[i];
    }
  }
}

// A paged cache of 16-token blocks in shuffled order, 3 kv heads per row.
struct PagedKv {
  static constexpr int kBlock = 16, kHeads = 3;
  int dh;
  std::vector<uint16_t> pool;
  std::vector<int32_t> table;

  PagedKv(const std::vector<float>& k, const std::vector<float>& v, int dh, int n, int head)
      : dh(dh) {
    const int blocks = (n + kBlock - 1) / kBlock;
    table.resize(blocks);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(n));
    pool.assign(static_cast<size_t>(blocks) * 2 * kBlock * kHeads * dh, 0x7E00);  // NaN filler
    for (int j = 0; j < n; ++j) {
      for (int d = 0; d < dh; ++d) {
        const size_t row =
            (static_cast<size_t>(table[j / kBlock]) * 2 * kBlock + j % kBlock) * kHeads * dh +
            head * dh + d;
        pool[row] = F32ToF16(k[j * dh + d]);
        pool[row + kBlock * kHeads * dh] = F32ToF16(v[j * dh + d]);
      }
    }
  }
  KvHeadRows Rows(int head) const {
    return {pool.data() + head * dh, table.data(), 2 * kBlock * kHeads * dh,
            kBlock * kHeads * dh,    kHeads * dh,  kBlock};
  }
};

// LlamaAttendRows over rows [0, n_ctx.size()) of q (head_dim each), with
// NaN-filled scratch so that a read of anything unwritten shows.
std::vector<std::vector<float>> AttendMany(const std::vector<uint16_t>& q, int dh, float scale,
                                           const std::vector<int>& n_ctx, const KvHeadRows& kv) {
  const int rows = static_cast<int>(n_ctx.size());
  const LlamaAttendScratchSize need = LlamaAttendScratchNeeded(dh, rows, n_ctx.back());
  std::vector<float> scratch(need.floats, NAN);
  std::vector<int64_t> offsets(need.offsets, -1);
  std::vector<std::vector<float>> got(rows, std::vector<float>(dh, NAN));
  std::vector<float*> outs;
  for (auto& row : got) outs.push_back(row.data());
  LlamaAttendRows(q.data(), rows, n_ctx.data(), nullptr, dh, scale, kv, scratch.data(),
                  offsets.data(), outs.data());
  return got;
}

std::vector<float> AttendOne(const std::vector<uint16_t>& q, int dh, float scale, int n,
                             const KvHeadRows& kv) {
  return AttendMany(q, dh, scale, {n}, kv)[0];
}

TEST_P(LlamaNumericsTest, OneRowMatchesModelBitwise) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int dh : {16, 64, 80, 128}) {
    for (int n : {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 95, 96, 97, 128, 150, 300}) {
      std::vector<float> q(dh), k(n * dh), v(n * dh);
      for (float& x : q) x = RoundF16(2.0f * normal(rng));
      for (float& x : k) x = RoundF16(2.0f * normal(rng));
      for (float& x : v) x = RoundF16(normal(rng));
      const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
      const std::vector<float> want = ModelAttend(q, k, v, dh, n, scale);

      const int head = 1;
      const PagedKv kv(k, v, dh, n, head);
      std::vector<uint16_t> qh(dh);
      for (int i = 0; i < dh; ++i) qh[i] = F32ToF16(q[i]);
      const std::vector<float> got = AttendOne(qh, dh, scale, n, kv.Rows(head));
      for (int d = 0; d < dh; ++d) {
        ASSERT_EQ(Bits(got[d]), Bits(want[d]))
            << "dh " << dh << " n " << n << " d " << d << ": " << got[d] << " vs " << want[d];
      }
    }
  }
}

// Rows sharing K/V reads (a tile: several tokens x several heads) get the
// bits each would get alone, across row groups and 64-position slot
// boundaries.
TEST_P(LlamaNumericsTest, ManyRowsMatchModelBitwise) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  struct Case {
    int dh, first_pos, tokens, heads;
    float spread = 2.0f;  // of q and k; 6: scores span ~±100, so exps saturate, go subnormal
  };
  const Case cases[] = {
      {64, 0, 16, 3},  {64, 20, 16, 3}, {64, 90, 7, 3},       {64, 31, 2, 1},      {64, 60, 10, 9},
      {16, 5, 24, 3},  {80, 40, 30, 3}, {128, 120, 4, 2},     {64, 0, 1, 1},       {64, 200, 1, 3},
      {64, 63, 3, 24}, {64, 600, 5, 3}, {64, 70, 6, 3, 6.0f}, {80, 33, 4, 2, 6.0f}};
  for (const Case& c : cases) {
    const int n = c.first_pos + c.tokens, dh = c.dh;
    std::vector<float> k(n * dh), v(n * dh);
    for (float& x : k) x = RoundF16(c.spread * normal(rng));
    for (float& x : v) x = RoundF16(normal(rng));
    const int rows = c.tokens * c.heads;
    std::vector<float> q(static_cast<size_t>(rows) * dh);
    for (float& x : q) x = RoundF16(c.spread * normal(rng));
    std::vector<uint16_t> qh(q.size());
    for (size_t i = 0; i < q.size(); ++i) qh[i] = F32ToF16(q[i]);
    std::vector<int> n_ctx(rows);
    for (int r = 0; r < rows; ++r) n_ctx[r] = c.first_pos + r / c.heads + 1;
    const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
    const int head = 2;
    const PagedKv kv(k, v, dh, n, head);
    const std::vector<std::vector<float>> got = AttendMany(qh, dh, scale, n_ctx, kv.Rows(head));
    for (int r = 0; r < rows; ++r) {
      const std::vector<float> qr(q.begin() + static_cast<int64_t>(r) * dh,
                                  q.begin() + static_cast<int64_t>(r + 1) * dh);
      const std::vector<float> want = ModelAttend(qr, k, v, dh, n_ctx[r], scale);
      for (int d = 0; d < dh; ++d) {
        ASSERT_EQ(Bits(got[r][d]), Bits(want[d]))
            << "dh " << dh << " first_pos " << c.first_pos << " row " << r << " (n_ctx " << n_ctx[r]
            << ") d " << d << ": " << got[r][d] << " vs " << want[d];
      }
    }
  }
}

}  // namespace
}  // namespace pdserve
