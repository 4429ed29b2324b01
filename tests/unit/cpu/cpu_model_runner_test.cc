// CpuModelRunner invariants on random models: a sequence's logits do not
// depend on what else is in the batch, how its prompt was chunked, the
// thread count, or (beyond rounding) the kernel ISA; bad batches change
// nothing. The comparison with a naive forward pass is in
// cpu_model_runner_reference_test.cc.
#include "common/cpu/cpu_model_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/engine/kv_cache.h"
#include "common/quant/kernels.h"
#include "gtest/gtest.h"
#include "tests/testing/random_model_util.h"

namespace pdserve {
namespace {

using test::LoadTestModel;
using test::RandomTokens;
using test::TestModel;

constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumBlocks = 64;

RandomModelSpec GqaSpec() {
  RandomModelSpec s;
  s.n_layers = 3;
  s.n_embd = 96;
  s.n_heads = 6;
  s.n_kv_heads = 2;  // 3 query heads per kv head
  s.n_ff = 160;
  s.n_vocab = 322;  // not a multiple of the 4-row kernel group
  s.seed = 42;
  return s;
}

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = LoadTestModel(GqaSpec());
    ASSERT_NE(model_, nullptr);
  }
  std::unique_ptr<KvCache> NewCache() {
    auto c = KvCache::Create(KvLayout::ForModel(model_->config, kBlockSize), kNumBlocks);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }
  std::unique_ptr<CpuModelRunner> NewRunner(int threads) {
    return std::make_unique<CpuModelRunner>(model_->config, &model_->weights, threads);
  }
  static std::vector<int32_t> Alloc(KvCache& cache, int64_t tokens) {
    auto b = cache.allocator().Allocate(BlocksForTokens(tokens, kBlockSize));
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *b : std::vector<int32_t>();
  }
  // Feeds tokens[begin, end) as one chunk; returns the last token's logits.
  static std::vector<float> Feed(ModelRunner& r, KvCache& cache, const std::vector<int32_t>& t,
                                 int begin, int end, const std::vector<int32_t>& blocks) {
    ForwardBatch batch;
    batch.chunks.push_back(
        {absl::MakeConstSpan(t.data() + begin, end - begin), begin, blocks, true});
    std::vector<float> logits;
    const absl::Status s = r.Forward(batch, cache, &logits);
    EXPECT_TRUE(s.ok()) << s;
    return logits;
  }
  // One-shot prefill of `t` in a fresh cache.
  std::vector<float> Alone(ModelRunner& r, const std::vector<int32_t>& t) {
    auto cache = NewCache();
    const std::vector<int32_t> blocks = Alloc(*cache, static_cast<int64_t>(t.size()));
    return Feed(r, *cache, t, 0, static_cast<int>(t.size()), blocks);
  }
  int32_t vocab() const { return model_->config.n_vocab; }

  std::unique_ptr<TestModel> model_;
};

int Argmax(const std::vector<float>& v, size_t offset, size_t n) {
  return static_cast<int>(std::max_element(v.begin() + offset, v.begin() + offset + n) - v.begin() -
                          offset);
}

TEST_F(RunnerTest, SequenceAloneEqualsSequenceInRaggedBatch) {
  for (int threads : {1, 2}) {
    auto runner = NewRunner(threads);
    const std::vector<int32_t> a = RandomTokens(21, vocab(), 1);
    const std::vector<int32_t> b = RandomTokens(12, vocab(), 2);  // 11 cached + 1 decode
    const std::vector<int32_t> c = RandomTokens(19, vocab(), 3);  // 5 cached + chunk of 14
    const std::vector<float> la = Alone(*runner, a);
    const std::vector<float> lb = Alone(*runner, b);
    std::vector<float> lc_alone;
    {
      auto cache = NewCache();
      const auto blocks = Alloc(*cache, 19);
      Feed(*runner, *cache, c, 0, 5, blocks);
      lc_alone = Feed(*runner, *cache, c, 5, 19, blocks);
    }
    auto cache = NewCache();
    const auto ba = Alloc(*cache, 21), bb = Alloc(*cache, 12), bc = Alloc(*cache, 19);
    Feed(*runner, *cache, b, 0, 11, bb);
    Feed(*runner, *cache, c, 0, 5, bc);
    ForwardBatch batch;
    batch.chunks.push_back({absl::MakeConstSpan(&b[11], 1), 11, bb, true});
    batch.chunks.push_back({absl::MakeConstSpan(a), 0, ba, true});
    batch.chunks.push_back({absl::MakeConstSpan(&c[5], 14), 5, bc, true});
    std::vector<float> logits;
    ASSERT_TRUE(runner->Forward(batch, *cache, &logits).ok());
    ASSERT_EQ(logits.size(), 3u * vocab());
    for (int i = 0; i < vocab(); ++i) {
      ASSERT_EQ(logits[i], lb[i]) << "decode seq, threads " << threads << " id " << i;
      ASSERT_EQ(logits[vocab() + i], la[i]) << "prefill seq, threads " << threads << " id " << i;
      ASSERT_EQ(logits[2 * vocab() + i], lc_alone[i]) << "chunk seq, threads " << threads;
    }
  }
}

TEST_F(RunnerTest, LogitsOnlyForChunksThatAsk) {
  auto runner = NewRunner(2);
  auto cache = NewCache();
  const std::vector<int32_t> a = RandomTokens(9, vocab(), 4), b = RandomTokens(7, vocab(), 5);
  const auto ba = Alloc(*cache, 9), bb = Alloc(*cache, 7);
  ForwardBatch batch;
  batch.chunks.push_back({absl::MakeConstSpan(a), 0, ba, false});
  batch.chunks.push_back({absl::MakeConstSpan(b), 0, bb, true});
  std::vector<float> logits(3, 1.0f);
  ASSERT_TRUE(runner->Forward(batch, *cache, &logits).ok());
  EXPECT_EQ(logits, Alone(*runner, b));
  batch.chunks[1].want_logits = false;
  ASSERT_TRUE(runner->Forward(batch, *cache, &logits).ok());
  EXPECT_TRUE(logits.empty());
}

TEST_F(RunnerTest, ChunkedPrefillEqualsOneShot) {
  auto runner = NewRunner(2);
  const std::vector<int32_t> t = RandomTokens(40, vocab(), 6);
  const std::vector<float> one_shot = Alone(*runner, t);
  for (int chunk : {1, 3, 7}) {
    auto cache = NewCache();
    const auto blocks = Alloc(*cache, 40);
    std::vector<float> last;
    for (int begin = 0; begin < 40; begin += chunk) {
      last = Feed(*runner, *cache, t, begin, std::min(40, begin + chunk), blocks);
    }
    EXPECT_EQ(last, one_shot) << "chunk " << chunk;
  }
}

TEST_F(RunnerTest, DecodeStepEqualsLongerPrefill) {
  auto runner = NewRunner(1);
  const std::vector<int32_t> t = RandomTokens(33, vocab(), 7);  // crosses a block boundary
  for (int n : {15, 16, 31, 32}) {
    auto cache = NewCache();
    const auto blocks = Alloc(*cache, n + 1);
    Feed(*runner, *cache, t, 0, n, blocks);
    const std::vector<float> decode = Feed(*runner, *cache, t, n, n + 1, blocks);
    const std::vector<int32_t> prefix(t.begin(), t.begin() + n + 1);
    EXPECT_EQ(decode, Alone(*runner, prefix)) << "n " << n;
  }
}

TEST_F(RunnerTest, OneAndTwoThreadsAgreeBitwise) {
  auto r1 = NewRunner(1), r2 = NewRunner(2), r3 = NewRunner(3);
  for (int len : {1, 5, 30}) {
    const std::vector<int32_t> t = RandomTokens(len, vocab(), 100 + len);
    const std::vector<float> l1 = Alone(*r1, t);
    EXPECT_EQ(l1, Alone(*r2, t)) << "len " << len;
    EXPECT_EQ(l1, Alone(*r3, t)) << "len " << len;
  }
}

TEST_F(RunnerTest, ScalarAndSimdIsasAgree) {
  if (!CpuSupportsAvx2()) GTEST_SKIP() << "no SIMD ISA on this CPU";
  struct Restore {
    KernelIsa isa = ActiveKernelIsa();
    ~Restore() { ForceKernelIsaForTesting(isa); }
  } restore;
  auto runner = NewRunner(2);
  std::vector<KernelIsa> simd = {KernelIsa::kAvx2};
  if (CpuSupportsAvx512Vnni()) simd.push_back(KernelIsa::kAvx512Vnni);
  // Summation order differs, so a rare activation rounding (int8 or f16)
  // lands on the other side; random weights amplify that to ~0.7% of the
  // logit spread at worst (seeds 12 and 14 do, 11 and 13 stay ~1e-7).
  for (uint64_t seed : {11, 12, 13, 14}) {
    const std::vector<int32_t> t = RandomTokens(24, vocab(), seed);
    ForceKernelIsaForTesting(KernelIsa::kScalar);
    const std::vector<float> ref = Alone(*runner, t);
    const auto [lo, hi] = std::minmax_element(ref.begin(), ref.end());
    for (KernelIsa isa : simd) {
      ForceKernelIsaForTesting(isa);
      const std::vector<float> got = Alone(*runner, t);
      ASSERT_EQ(got.size(), ref.size());
      float max_err = 0.0f;
      for (size_t i = 0; i < ref.size(); ++i)
        max_err = std::max(max_err, std::fabs(got[i] - ref[i]));
      EXPECT_LE(max_err, 0.02f * (*hi - *lo)) << "isa " << static_cast<int>(isa);
      EXPECT_EQ(Argmax(got, 0, ref.size()), Argmax(ref, 0, ref.size()));
    }
  }
}

// Snapshot of the whole KV pool, to prove a rejected batch wrote nothing.
std::string PoolBytes(KvCache& cache) {
  const int64_t n =
      cache.layout().bytes_per_layer_block() * cache.layout().n_layers * cache.num_ids();
  return std::string(reinterpret_cast<const char*>(cache.LayerBlock(0, 0)), n);
}

TEST_F(RunnerTest, InvalidBatchesAreRejectedWithoutWriting) {
  auto runner = NewRunner(2);
  auto cache = NewCache();
  const std::vector<int32_t> good = RandomTokens(20, vocab(), 8);
  const auto blocks = Alloc(*cache, 20);
  Feed(*runner, *cache, good, 0, 10, blocks);  // some real state to preserve
  const int32_t ctx = model_->config.context_length;
  std::vector<int32_t> bad_token = good;
  bad_token[4] = vocab();
  std::vector<int32_t> neg_token = good;
  neg_token[0] = -1;
  const std::vector<int32_t> one_block = {blocks[0]};
  const std::vector<int32_t> bad_block = {blocks[0], kNumBlocks};
  const std::vector<int32_t> neg_block = {blocks[0], -2};
  std::vector<int32_t> all_blocks(BlocksForTokens(ctx + 1, kBlockSize), blocks[0]);
  struct Case {
    const char* name;
    SequenceChunk chunk;
    absl::StatusCode code;
  };
  const Case cases[] = {
      {"token id == vocab",
       {absl::MakeConstSpan(bad_token), 0, blocks, true},
       absl::StatusCode::kInvalidArgument},
      {"negative token id",
       {absl::MakeConstSpan(neg_token), 0, blocks, true},
       absl::StatusCode::kInvalidArgument},
      {"past context",
       {absl::MakeConstSpan(&good[0], 2), ctx - 1, all_blocks, true},
       absl::StatusCode::kOutOfRange},
      {"negative start",
       {absl::MakeConstSpan(&good[0], 2), -1, blocks, true},
       absl::StatusCode::kOutOfRange},
      {"short block table",
       {absl::MakeConstSpan(&good[10], 10), 10, one_block, true},
       absl::StatusCode::kInvalidArgument},
      {"block id too large",
       {absl::MakeConstSpan(&good[10], 10), 10, bad_block, true},
       absl::StatusCode::kInvalidArgument},
      {"negative block id",
       {absl::MakeConstSpan(&good[10], 10), 10, neg_block, true},
       absl::StatusCode::kInvalidArgument},
      {"empty chunk",
       {absl::Span<const int32_t>(), 10, blocks, true},
       absl::StatusCode::kInvalidArgument},
  };
  const std::string before = PoolBytes(*cache);
  for (const Case& c : cases) {
    ForwardBatch batch;
    // A valid chunk first: nothing of it may be written either.
    batch.chunks.push_back({absl::MakeConstSpan(&good[10], 10), 10, blocks, true});
    batch.chunks.push_back(c.chunk);
    std::vector<float> logits = {7.0f, 8.0f};
    const absl::Status s = runner->Forward(batch, *cache, &logits);
    EXPECT_EQ(s.code(), c.code) << c.name << ": " << s;
    EXPECT_FALSE(s.message().empty()) << c.name;
    EXPECT_EQ(logits, (std::vector<float>{7.0f, 8.0f})) << c.name;
    EXPECT_TRUE(PoolBytes(*cache) == before) << c.name << " wrote into the cache";
  }
  // The cache state is intact: finishing the sequence matches a fresh run.
  EXPECT_EQ(Feed(*runner, *cache, good, 10, 20, blocks), Alone(*runner, good));
}

// A cache laid out for another model (fewer layers here) would be indexed
// past its end: refused before anything runs.
TEST_F(RunnerTest, ACacheOfAnotherShapeIsRefused) {
  auto runner = NewRunner(1);
  KvLayout small = KvLayout::ForModel(model_->config, kBlockSize);
  small.n_layers -= 1;
  auto cache = KvCache::Create(small, kNumBlocks);
  ASSERT_TRUE(cache.ok());
  const std::vector<int32_t> t = RandomTokens(5, vocab(), 3);
  const auto blocks = Alloc(**cache, 5);
  ForwardBatch batch;
  batch.chunks.push_back({absl::MakeConstSpan(t), 0, blocks, true});
  std::vector<float> logits;
  const absl::Status s = runner->Forward(batch, **cache, &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(logits.empty());
}

TEST_F(RunnerTest, OnLayerDoneRunsOncePerLayerAfterThatLayersKv) {
  auto runner = NewRunner(2);
  auto cache = NewCache();
  const std::vector<int32_t> a = RandomTokens(18, vocab(), 9), b = RandomTokens(3, vocab(), 10);
  const auto ba = Alloc(*cache, 18), bb = Alloc(*cache, 3);
  const int64_t kvd = cache->layout().kv_dim();
  // Is any K/V of token `pos` in `blocks` non-zero in `layer`?
  auto written = [&](int layer, const std::vector<int32_t>& blocks, int pos) {
    const uint16_t* k = cache->K(layer, blocks[pos / kBlockSize]) + (pos % kBlockSize) * kvd;
    const uint16_t* v = cache->V(layer, blocks[pos / kBlockSize]) + (pos % kBlockSize) * kvd;
    bool any_k = false, any_v = false;
    for (int64_t i = 0; i < kvd; ++i) any_k |= k[i] != 0, any_v |= v[i] != 0;
    return any_k && any_v;
  };
  std::vector<int> calls;
  ForwardBatch batch;
  batch.chunks.push_back({absl::MakeConstSpan(a), 0, ba, true});
  batch.chunks.push_back({absl::MakeConstSpan(b), 0, bb, false});
  batch.on_layer_done = [&](int layer) {
    calls.push_back(layer);
    for (int pos = 0; pos < 18; ++pos) EXPECT_TRUE(written(layer, ba, pos)) << layer << " " << pos;
    for (int pos = 0; pos < 3; ++pos) EXPECT_TRUE(written(layer, bb, pos)) << layer << " " << pos;
    if (layer + 1 < model_->config.n_layers) EXPECT_FALSE(written(layer + 1, ba, 0));
  };
  std::vector<float> logits;
  ASSERT_TRUE(runner->Forward(batch, *cache, &logits).ok());
  std::vector<int> want(model_->config.n_layers);
  for (int l = 0; l < model_->config.n_layers; ++l) want[l] = l;
  EXPECT_EQ(calls, want);
}

TEST_F(RunnerTest, EmptyBatchIsANoOp) {
  auto runner = NewRunner(2);
  auto cache = NewCache();
  ForwardBatch batch;
  int calls = 0;
  batch.on_layer_done = [&](int) { ++calls; };
  std::vector<float> logits = {1.0f};
  EXPECT_TRUE(runner->Forward(batch, *cache, &logits).ok());
  EXPECT_TRUE(logits.empty());
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace pdserve
