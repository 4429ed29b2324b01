// The int8 KV cache end to end on the random model: what CpuModelRunner
// stores, what AttendHead computes from it, and that a token's stored bytes
// do not depend on how the tokens arrived. Tolerances are derived from the
// stored scales (common/cpu/kv_int8.h), not picked.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "common/cpu/attention.h"
#include "common/cpu/cpu_model_runner.h"
#include "common/cpu/kv_int8.h"
#include "common/quant/half.h"
#include "gtest/gtest.h"
#include "tests/testing/random_model_util.h"

namespace pdserve {
namespace {

using ::pdserve::test::LoadTestModel;
using ::pdserve::test::RandomTokens;
using ::pdserve::test::TestModel;

constexpr int32_t kBlockSize = 16;
constexpr int kTokens = 37;  // two full blocks and a partial one
constexpr double kEps = std::numeric_limits<float>::epsilon();
constexpr double kF16Rel = 1.0 / 2048;      // f16 rounding, relative (2^-11)
constexpr double kF16Abs = 1.0 / 16777216;  // 2^-24 >= f16 rounding error below 2^-14

RandomModelSpec Spec() {
  RandomModelSpec s;
  s.n_layers = 2;
  s.n_embd = 96;
  s.n_heads = 6;
  s.n_kv_heads = 2;
  s.n_ff = 160;
  s.n_vocab = 322;
  s.seed = 42;
  return s;
}

class KvInt8AttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = LoadTestModel(Spec());
    ASSERT_NE(model_, nullptr);
    tokens_ = RandomTokens(kTokens, model_->config.n_vocab, 5);
    f16_ = Prefill("f16", {kTokens});
    int8_ = Prefill("int8", {kTokens});
  }

  // A fresh cache of `dtype` holding tokens_, fed in chunks ending at `ends`.
  std::unique_ptr<KvCache> Prefill(const std::string& dtype, const std::vector<int>& ends) {
    auto cache = KvCache::Create(KvLayout::ForModel(model_->config, kBlockSize, dtype), 8);
    EXPECT_TRUE(cache.ok()) << cache.status();
    blocks_ = (*cache)->allocator().Allocate(BlocksForTokens(kTokens, kBlockSize)).value();
    CpuModelRunner runner(model_->config, &model_->weights, 1);
    int begin = 0;
    for (int end : ends) {
      ForwardBatch batch;
      batch.chunks.push_back(
          {absl::MakeConstSpan(tokens_).subspan(begin, end - begin), begin, blocks_, true});
      std::vector<float> logits;
      EXPECT_TRUE(runner.Forward(batch, **cache, &logits).ok());
      begin = end;
    }
    return std::move(cache).value();
  }

  int dh() const { return model_->config.head_dim; }
  int nkv() const { return model_->config.n_kv_heads; }
  int64_t kvd() const { return model_->config.kv_dim(); }
  float F16K(int layer, int pos, int i) const {
    return F16ToF32(f16_->K(layer, blocks_[pos / kBlockSize])[(pos % kBlockSize) * kvd() + i]);
  }
  float F16V(int layer, int pos, int i) const {
    return F16ToF32(f16_->V(layer, blocks_[pos / kBlockSize])[(pos % kBlockSize) * kvd() + i]);
  }
  float KScale(int layer, int pos, int h) const {
    return int8_->KScales(layer, blocks_[pos / kBlockSize])[(pos % kBlockSize) * nkv() + h];
  }
  float VScale(int layer, int pos, int h) const {
    return int8_->VScales(layer, blocks_[pos / kBlockSize])[(pos % kBlockSize) * nkv() + h];
  }
  float Int8K(int layer, int pos, int i) const {
    const int8_t q = int8_->K8(layer, blocks_[pos / kBlockSize])[(pos % kBlockSize) * kvd() + i];
    return q * KScale(layer, pos, i / dh());
  }
  float Int8V(int layer, int pos, int i) const {
    const int8_t q = int8_->V8(layer, blocks_[pos / kBlockSize])[(pos % kBlockSize) * kvd() + i];
    return q * VScale(layer, pos, i / dh());
  }
  // Largest distance between a stored int8 element and the f16 one of the
  // same true value x: half a step (s / 2) plus f16's own rounding of x,
  // with |x| <= absmax = 127 s.
  static double ElementBound(float scale) {
    return scale * (0.5 + 127 * kF16Rel) + 4 * kEps * 127 * scale + kF16Abs;
  }

  std::unique_ptr<TestModel> model_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> blocks_;
  std::unique_ptr<KvCache> f16_, int8_;
};

// Layer 0's K and V come from the embeddings alone, so both caches stored
// the same values, each in its own format.
TEST_F(KvInt8AttentionTest, RunnerStoresLayerZeroWithinHalfAStep) {
  for (int pos = 0; pos < kTokens; ++pos) {
    for (int i = 0; i < kvd(); ++i) {
      const int h = i / dh();
      ASSERT_LE(std::fabs(Int8K(0, pos, i) - F16K(0, pos, i)), ElementBound(KScale(0, pos, h)))
          << "K pos " << pos << " i " << i;
      ASSERT_LE(std::fabs(Int8V(0, pos, i) - F16V(0, pos, i)), ElementBound(VScale(0, pos, h)))
          << "V pos " << pos << " i " << i;
    }
    for (int h = 0; h < nkv(); ++h) EXPECT_GT(KScale(0, pos, h), 0.0f) << "pos " << pos;
  }
}

// Attention over layer 0 with a random query, against a double-precision
// reference over the f16 cache's values. With scores s_j = c q.k_j
// (c = 1/sqrt(dh)), perturbing every k_j by at most e_j per element moves
// s_j by at most eps_j = c sum_i |q_i| e_j; softmax weights then move by at
// most p_j (exp(2 max eps) - 1), so
//   |out - ref| <= (exp(2 max eps) - 1) max|v| + max e^V
// (max|v| over the perturbed values). For int8, e = ElementBound(scale);
// for the f16 path, q and p are rounded to f16: eps_j = c 2^-11 sum |q_i k_ji|
// and p adds 2^-11 max|v|. Float arithmetic adds (4 n_ctx + 4 dh) eps max|v|.
TEST_F(KvInt8AttentionTest, AttentionIsWithinTheBoundDerivedFromTheScales) {
  const AttentionShape shape{model_->config.n_heads, nkv(), dh()};
  const double c = 1.0 / std::sqrt(static_cast<double>(dh()));
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> scratch;
  double worst_ratio = 0.0;
  for (int n_ctx : {1, 16, 17, kTokens}) {
    for (int head = 0; head < shape.n_heads; ++head) {
      const int kvh = head / (shape.n_heads / nkv());
      std::vector<float> q(dh());
      for (float& x : q) x = normal(rng);
      std::vector<double> s(n_ctx), ref(dh(), 0.0);
      double max_s = -INFINITY, sum = 0.0, max_v = 0.0, eps8 = 0.0, eps16 = 0.0, max_ev = 0.0;
      double q_abs = 0.0;
      for (float x : q) q_abs += std::fabs(x);
      for (int j = 0; j < n_ctx; ++j) {
        double dot = 0.0, qk_abs = 0.0;
        for (int i = 0; i < dh(); ++i) {
          dot += static_cast<double>(q[i]) * F16K(0, j, kvh * dh() + i);
          qk_abs += std::fabs(q[i] * F16K(0, j, kvh * dh() + i));
          max_v = std::max(max_v, static_cast<double>(std::fabs(F16V(0, j, kvh * dh() + i))));
        }
        s[j] = c * dot;
        max_s = std::max(max_s, s[j]);
        eps8 = std::max(eps8, c * q_abs * ElementBound(KScale(0, j, kvh)));
        eps16 = std::max(eps16, c * kF16Rel * qk_abs);
        max_ev = std::max(max_ev, ElementBound(VScale(0, j, kvh)));
      }
      for (int j = 0; j < n_ctx; ++j) sum += std::exp(s[j] - max_s);
      for (int j = 0; j < n_ctx; ++j) {
        const double p = std::exp(s[j] - max_s) / sum;
        for (int i = 0; i < dh(); ++i) ref[i] += p * F16V(0, j, kvh * dh() + i);
      }
      const double arith = (4.0 * n_ctx + 4.0 * dh()) * kEps * (max_v + max_ev);
      const double bound8 = std::expm1(2 * eps8) * (max_v + max_ev) + max_ev + arith;
      const double bound16 = std::expm1(2 * eps16) * max_v + kF16Rel * max_v * 1.01 + arith;

      std::vector<float> out8(dh()), out16(dh());
      AttendHead(shape, head, q.data(), n_ctx, blocks_, *int8_, 0, out8.data(), scratch);
      AttendHead(shape, head, q.data(), n_ctx, blocks_, *f16_, 0, out16.data(), scratch);
      for (int i = 0; i < dh(); ++i) {
        const double e8 = std::fabs(out8[i] - ref[i]);
        ASSERT_LE(e8, bound8) << "n_ctx " << n_ctx << " head " << head << " i " << i;
        ASSERT_LE(std::fabs(out16[i] - ref[i]), bound16) << "n_ctx " << n_ctx << " head " << head;
        ASSERT_LE(std::fabs(out8[i] - out16[i]), bound8 + bound16);
        worst_ratio = std::max(worst_ratio, e8 / bound8);
      }
      // The bound says something: below the magnitude of the values it bounds
      // (it is worst case: every rounding error aligned with q).
      EXPECT_LT(bound8, max_v) << "n_ctx " << n_ctx << " head " << head;
    }
  }
  std::cout << "largest int8 attention error / derived bound: " << worst_ratio << "\n";
}

// Per-token scales: a token's stored bytes are a function of its K/V alone,
// so one-shot prefill, chunked prefill and token-by-token decode leave the
// same int8 cache (what prefix-cache reuse and P/D transfer rely on).
TEST_F(KvInt8AttentionTest, StoredBytesDoNotDependOnHowTokensArrived) {
  std::vector<int> one_by_one;
  for (int i = 1; i <= kTokens; ++i) one_by_one.push_back(i);
  for (const std::vector<int>& ends : {std::vector<int>{5, 20, kTokens}, one_by_one}) {
    std::unique_ptr<KvCache> other = Prefill("int8", ends);
    const size_t bytes = static_cast<size_t>(other->layout().bytes_per_layer_block());
    for (int l = 0; l < model_->config.n_layers; ++l) {
      for (int32_t b : blocks_) {
        EXPECT_EQ(std::memcmp(other->LayerBlock(l, b), int8_->LayerBlock(l, b), bytes), 0)
            << "layer " << l << " block " << b << " after " << ends.size() << " chunks";
      }
    }
  }
}

}  // namespace
}  // namespace pdserve
