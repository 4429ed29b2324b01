// Sliding-window attention: a row at position p attends (p - W, p]. Checked
// against a double-precision softmax over the window alone, on every cache
// dtype and kernel ISA, with the K/V rows the kernels promise not to read
// (before the first row's window, rounded down to 64 positions) poisoned:
// a read would turn the output into NaN.
#include <cmath>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "common/cpu/attention_tile.h"
#include "common/cpu/kv_int8.h"
#include "common/quant/half.h"
#include "common/quant/kernels.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

constexpr AttentionShape kShape{.n_heads = 4, .n_kv_heads = 1, .head_dim = 64};  // MQA
constexpr int kBlockSize = 16;
constexpr int kContext = 300;
constexpr int kWindow = 100;

class SlidingWindowAttentionTest
    : public ::testing::TestWithParam<std::tuple<std::string, KernelIsa>> {
 protected:
  void SetUp() override {
    ForceKernelIsaForTesting(std::get<1>(GetParam()));
    const KvLayout layout{.n_layers = 1,
                          .n_kv_heads = kShape.n_kv_heads,
                          .head_dim = kShape.head_dim,
                          .block_size = kBlockSize,
                          .dtype = std::get<0>(GetParam())};
    const int n_blocks = (kContext + kBlockSize - 1) / kBlockSize;
    cache_ = KvCache::Create(layout, n_blocks).value();
    for (int b = 0; b < n_blocks; ++b) blocks_.push_back(n_blocks - 1 - b);
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    k_.resize(kContext * kShape.head_dim);
    v_.resize(kContext * kShape.head_dim);
    for (auto& x : k_) x = normal(rng);
    for (auto& x : v_) x = normal(rng);
    q_.resize(kContext * kShape.n_heads * kShape.head_dim);
    for (auto& x : q_) x = normal(rng);
    for (int j = 0; j < kContext; ++j) Store(j, false);
  }
  void TearDown() override { ForceKernelIsaForTesting(KernelIsa::kAvx512Vnni); }

  // Writes position j's K/V, or NaN in their place (int8: NaN scales).
  void Store(int j, bool poison) {
    const int dh = kShape.head_dim;
    const int32_t b = blocks_[j / kBlockSize];
    const int r = j % kBlockSize;
    if (cache_->layout().is_int8()) {
      cache_->KScales(0, b)[r] = QuantizeKvInt8(&k_[j * dh], dh, cache_->K8(0, b) + r * dh);
      cache_->VScales(0, b)[r] = QuantizeKvInt8(&v_[j * dh], dh, cache_->V8(0, b) + r * dh);
      if (poison) cache_->KScales(0, b)[r] = cache_->VScales(0, b)[r] = NAN;
      return;
    }
    for (int i = 0; i < dh; ++i) {
      cache_->K(0, b)[r * dh + i] = poison ? 0x7E00 : F32ToF16(k_[j * dh + i]);
      cache_->V(0, b)[r * dh + i] = poison ? 0x7E00 : F32ToF16(v_[j * dh + i]);
    }
  }

  // Head h of the row at position p, softmax in double over the window.
  std::vector<double> Exact(int p, int h) const {
    const int dh = kShape.head_dim;
    const float* q = &q_[(p * kShape.n_heads + h) * dh];
    const int lo = std::max(0, p + 1 - kWindow);
    std::vector<double> s;
    double max = -INFINITY;
    for (int j = lo; j <= p; ++j) {
      double dot = 0.0;
      for (int i = 0; i < dh; ++i) dot += static_cast<double>(q[i]) * k_[j * dh + i];
      s.push_back(dot / std::sqrt(static_cast<double>(dh)));
      max = std::max(max, s.back());
    }
    double sum = 0.0;
    for (double& x : s) sum += (x = std::exp(x - max));
    std::vector<double> out(dh, 0.0);
    for (int j = lo; j <= p; ++j) {
      for (int i = 0; i < dh; ++i) out[i] += s[j - lo] / sum * v_[j * dh + i];
    }
    return out;
  }

  std::unique_ptr<KvCache> cache_;
  std::vector<int32_t> blocks_;
  std::vector<float> k_, v_, q_;  // k_, v_: [position][head_dim]; q_: [position][head][head_dim]
};

TEST_P(SlidingWindowAttentionTest, MatchesTheWindowAloneWithoutReadingBeforeIt) {
  const int64_t stride = kShape.n_heads * kShape.head_dim;
  for (const auto& [first_pos, n_tokens] :
       std::vector<std::pair<int, int>>{{0, 16}, {90, 20}, {150, 1}, {230, 70}, {299, 1}}) {
    // What the tile may skip: everything before its first row's window,
    // rounded down to 64.
    const int unread = std::max(0, first_pos + 1 - kWindow) / 64 * 64;
    for (int j = 0; j < kContext; ++j) Store(j, j < unread);
    const AttentionTile tile{.first_token = 0,
                             .first_pos = first_pos,
                             .n_tokens = n_tokens,
                             .first_head = 0,
                             .n_heads = kShape.n_heads};
    std::vector<float> out(n_tokens * stride, NAN);
    AttentionScratch scratch;
    AttendTile(kShape, tile, kWindow, &q_[first_pos * stride], stride, blocks_, *cache_, 0,
               out.data(), scratch);
    for (int t = 0; t < n_tokens; ++t) {
      for (int h = 0; h < kShape.n_heads; ++h) {
        const std::vector<double> want = Exact(first_pos + t, h);
        for (int i = 0; i < kShape.head_dim; ++i) {
          // f16 (or int8) K/V and f16-rounded probabilities.
          ASSERT_NEAR(out[t * stride + h * kShape.head_dim + i], want[i], 0.03)
              << "position " << first_pos + t << " head " << h << " dim " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DtypesAndIsas, SlidingWindowAttentionTest,
                         ::testing::Combine(::testing::Values("f16", "int8"),
                                            ::testing::Values(KernelIsa::kScalar, KernelIsa::kAvx2,
                                                              KernelIsa::kAvx512Vnni)));

}  // namespace
}  // namespace pdserve
