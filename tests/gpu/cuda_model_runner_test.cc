// The CUDA runner against the CPU runner on a random model with SmolLM2's
// shapes (30 layers, GQA 9/3, 49152 vocab): logits agree within a stated
// tolerance, greedy generation agrees for 32 steps (except where the CPU
// itself sees a near tie), and a ragged batch matches sequence by sequence.
// The CPU quantises activations to int8 for its Q4_1 matmuls while the GPU
// runs f16 GEMMs, so "agree" means within that rounding, not bit-exact.
// Skips without a CUDA device.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "common/gpu/cuda/cuda_device.h"
#include "common/gpu/cuda/step_buffers.h"
#include "common/runtime/runtime_factory.h"
#include "gtest/gtest.h"
#include "tests/gpu/gpu_test_env.h"
#include "tests/testing/random_model_util.h"

namespace pdserve {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kBlocks = 256;
// Max |cpu - gpu| over a logit row, relative to the row's max |cpu|.
constexpr double kMaxRelError = 0.03;
constexpr double kMinCosine = 0.999;

struct Runtime {
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<KvCache> cache;
};

struct Agreement {
  double rel_error = 0;
  double cosine = 0;
};

Agreement Compare(const std::vector<float>& cpu, const std::vector<float>& gpu) {
  double max_abs = 0, max_err = 0, dot = 0, nc = 0, ng = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(double{cpu[i]}));
    max_err = std::max(max_err, std::fabs(double{cpu[i]} - gpu[i]));
    dot += double{cpu[i]} * gpu[i];
    nc += double{cpu[i]} * cpu[i];
    ng += double{gpu[i]} * gpu[i];
  }
  return {max_err / std::max(max_abs, 1e-12), dot / std::sqrt(std::max(nc * ng, 1e-30))};
}

int32_t Argmax(const float* row, int n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

class CudaModelRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::NoGpu()) GTEST_SKIP() << "no CUDA device";
    model_ = test::LoadTestModel(Spec());
    ASSERT_NE(model_, nullptr);
    Adapt(model_->config, model_->weights);
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    cpu_ = Make(DeviceSpec{}, threads);
    gpu_ = Make(DeviceSpec{DeviceSpec::Kind::kCuda, 0}, 1);
  }

  virtual RandomModelSpec Spec() const { return RandomModelSpec::SmolLm2Shapes(); }
  // Turns on architecture features the random llama file cannot carry,
  // with their weights, before both runners are made.
  virtual void Adapt(ModelConfig&, ModelWeights&) {}

  Runtime Make(const DeviceSpec& device, int threads, bool graphs = false) {
    Runtime rt;
    auto runner = CreateModelRunner(model_->config, &model_->weights, {device, threads, graphs});
    EXPECT_TRUE(runner.ok()) << runner.status();
    auto cache = CreateKvCache(device, KvLayout::ForModel(model_->config, kBlockSize), kBlocks);
    EXPECT_TRUE(cache.ok()) << cache.status();
    if (runner.ok()) rt.runner = std::move(*runner);
    if (cache.ok()) rt.cache = std::move(*cache);
    return rt;
  }

  static std::vector<float> Step(Runtime& rt, const ForwardBatch& batch) {
    std::vector<float> logits;
    const absl::Status st = rt.runner->Forward(batch, *rt.cache, &logits);
    EXPECT_TRUE(st.ok()) << st;
    return logits;
  }

  // Prefills `prompt`, then decodes `steps` greedy tokens; returns the
  // tokens and every step's logits.
  std::pair<std::vector<int32_t>, std::vector<std::vector<float>>> Greedy(
      Runtime& rt, std::vector<int32_t> tokens, int steps) {
    const int n_vocab = model_->config.n_vocab;
    std::vector<int32_t> table(BlocksForTokens(tokens.size() + steps, kBlockSize));
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
    std::vector<std::vector<float>> all;
    std::vector<int32_t> out;
    int32_t start = 0;
    std::vector<int32_t> input = tokens;
    for (int s = 0; s <= steps; ++s) {
      ForwardBatch batch;
      batch.chunks.push_back({input, start, table, true});
      all.push_back(Step(rt, batch));
      if (all.back().size() != static_cast<size_t>(n_vocab)) break;
      start += static_cast<int32_t>(input.size());
      const int32_t next = Argmax(all.back().data(), n_vocab);
      out.push_back(next);
      input = {next};
    }
    return {out, all};
  }

  void ExpectGreedyAgreement(const char* label) {
    constexpr int kSteps = 32;
    const std::vector<int32_t> prompt = test::RandomTokens(45, model_->config.n_vocab, 7);
    auto [cpu_tokens, cpu_logits] = Greedy(cpu_, prompt, kSteps);
    auto [gpu_tokens, gpu_logits] = Greedy(gpu_, prompt, kSteps);
    ASSERT_EQ(cpu_logits.size(), gpu_logits.size());
    double worst_err = 0, worst_cos = 1;
    int first_diff = -1;
    for (size_t s = 0; s < cpu_logits.size(); ++s) {
      if (first_diff < 0 && cpu_tokens[s] != gpu_tokens[s]) first_diff = static_cast<int>(s);
      if (first_diff >= 0) break;  // the sequences differ from here on
      const Agreement a = Compare(cpu_logits[s], gpu_logits[s]);
      worst_err = std::max(worst_err, a.rel_error);
      worst_cos = std::min(worst_cos, a.cosine);
    }
    std::printf("GPU_CHECK %s logits max_rel_error=%.5f min_cosine=%.6f greedy_match=%d/%d\n",
                label, worst_err, worst_cos, first_diff < 0 ? kSteps : first_diff, kSteps);
    EXPECT_LE(worst_err, kMaxRelError);
    EXPECT_GE(worst_cos, kMinCosine);
    if (first_diff >= 0) {
      // Only a near tie on the CPU may pick a different token.
      const std::vector<float>& row = cpu_logits[first_diff];
      const float margin = row[cpu_tokens[first_diff]] - row[gpu_tokens[first_diff]];
      const float scale = *std::max_element(
          row.begin(), row.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); });
      EXPECT_LE(margin, kMaxRelError * std::fabs(scale))
          << "greedy tokens diverge at step " << first_diff << " without a near tie";
    }
  }

  std::unique_ptr<test::TestModel> model_;
  Runtime cpu_, gpu_;
};

// A speculative draft's verification rows: every row's logits, in order,
// each as a one-token step at that position would give them (GPU sums do
// not depend on the number of rows a step has, so exactly).
TEST_F(CudaModelRunnerTest, VerificationRowsMatchOneTokenSteps) {
  const int n_vocab = model_->config.n_vocab;
  const std::vector<int32_t> tokens = test::RandomTokens(40, n_vocab, 9);
  const std::vector<int32_t> table = {0, 1, 2};
  Runtime other = Make(DeviceSpec{DeviceSpec::Kind::kCuda, 0}, 1);
  for (Runtime* rt : {&gpu_, &other}) {
    ForwardBatch prefix;
    prefix.chunks.push_back({absl::MakeConstSpan(tokens).subspan(0, 35), 0, table, false});
    Step(*rt, prefix);
  }
  ForwardBatch draft;
  draft.chunks.push_back({absl::MakeConstSpan(tokens).subspan(35, 5), 35, table, true, 5});
  const std::vector<float> rows = Step(gpu_, draft);
  ASSERT_EQ(rows.size(), static_cast<size_t>(5 * n_vocab));
  for (int i = 0; i < 5; ++i) {
    ForwardBatch one;
    one.chunks.push_back({absl::MakeConstSpan(tokens).subspan(35 + i, 1), 35 + i, table, true});
    const std::vector<float> want = Step(other, one);
    const std::vector<float> got(rows.begin() + i * n_vocab, rows.begin() + (i + 1) * n_vocab);
    const Agreement a = Compare(want, got);
    EXPECT_LE(a.rel_error, 1e-3) << "row " << i;
    EXPECT_EQ(Argmax(got.data(), n_vocab), Argmax(want.data(), n_vocab)) << "row " << i;
  }
}

TEST_F(CudaModelRunnerTest, PrefillAndGreedyDecodeMatchTheCpuRunner) {
  ExpectGreedyAgreement("smollm2");
}

// LLaMA 3.1-style RoPE (rope_freqs.weight, plus linear scaling) and K-quant
// weights through both runners.
class CudaLlama3StyleTest : public CudaModelRunnerTest {
 protected:
  RandomModelSpec Spec() const override {
    RandomModelSpec s;
    s.n_layers = 2, s.n_embd = 256, s.n_ff = 512, s.n_heads = 4, s.n_kv_heads = 2;
    s.n_vocab = 2048, s.context_length = 512, s.tied_output = false;
    s.matrix_type = 12;  // Q4_K
    s.rope_freq_factors = Llama3RopeFreqFactors(s.n_embd / s.n_heads, s.rope_base);
    s.rope_scaling_factor = 2.0f;
    return s;
  }
};

TEST_F(CudaLlama3StyleTest, PrefillAndGreedyDecodeMatchTheCpuRunner) {
  ExpectGreedyAgreement("llama3_style");
}

// Values around `center`, deterministic in the seed.
std::vector<float> RandomVector(size_t n, float center, float spread, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = center + spread * (static_cast<float>(x >> 8) / 16777216.0f - 0.5f);
  }
  return v;
}

RandomModelSpec SmallUntiedSpec(int n_layers, int n_kv_heads) {
  RandomModelSpec s;
  s.n_layers = n_layers, s.n_embd = 256, s.n_ff = 512, s.n_heads = 4, s.n_kv_heads = n_kv_heads;
  s.n_vocab = 2048, s.context_length = 512, s.tied_output = false;
  s.matrix_type = 12;  // Q4_K
  return s;
}

// qwen2's features: Q/K/V biases and NEOX (half-split) RoPE.
class CudaQwen2StyleTest : public CudaModelRunnerTest {
 protected:
  RandomModelSpec Spec() const override { return SmallUntiedSpec(2, 2); }
  void Adapt(ModelConfig& c, ModelWeights& w) override {
    c.architecture = "qwen2";
    c.rope_neox = true;
    c.qkv_bias = true;
    for (int l = 0; l < c.n_layers; ++l) {
      w.layers[l].bq = RandomVector(c.q_dim(), 0.0f, 1.0f, 10 + l);
      w.layers[l].bk = RandomVector(c.kv_dim(), 0.0f, 1.0f, 20 + l);
      w.layers[l].bv = RandomVector(c.kv_dim(), 0.0f, 1.0f, 30 + l);
    }
  }
};

TEST_F(CudaQwen2StyleTest, PrefillAndGreedyDecodeMatchTheCpuRunner) {
  ExpectGreedyAgreement("qwen2_style");
}

// gemma3's: one KV head (MQA), local layers with a 16-position window
// (shorter than the 45-token prompt, so it slides in prefill and decode)
// and their own RoPE base, per-head Q/K norms, post-attention and post-FFN
// norms, GELU gating, a scaled embedding and another attention scale.
class CudaGemma3StyleTest : public CudaModelRunnerTest {
 protected:
  RandomModelSpec Spec() const override { return SmallUntiedSpec(3, 1); }
  void Adapt(ModelConfig& c, ModelWeights& w) override {
    c.architecture = "gemma3";
    c.rope_neox = true;
    c.qk_norm = true;
    c.post_norms = true;
    c.ffn_activation = FfnActivation::kGelu;
    c.embed_scale = 16.0f;
    c.attn_scale = 0.5f / std::sqrt(static_cast<float>(c.head_dim));
    c.attn_scale_on_q = true;
    c.layer_window = {16, 16, 0};
    c.rope_base = 1000000.0f;
    c.rope_base_local = 10000.0f;
    for (int l = 0; l < c.n_layers; ++l) {
      w.layers[l].q_norm = RandomVector(c.head_dim, 1.0f, 0.5f, 40 + l);
      w.layers[l].k_norm = RandomVector(c.head_dim, 1.0f, 0.5f, 50 + l);
      w.layers[l].post_attn_norm = RandomVector(c.n_embd, 1.0f, 0.5f, 60 + l);
      w.layers[l].post_ffn_norm = RandomVector(c.n_embd, 1.0f, 0.5f, 70 + l);
    }
  }
};

TEST_F(CudaGemma3StyleTest, PrefillAndGreedyDecodeMatchTheCpuRunner) {
  ExpectGreedyAgreement("gemma3_style");
}

TEST_F(CudaModelRunnerTest, RaggedBatchMatchesSequenceBySequence) {
  const int n_vocab = model_->config.n_vocab;
  const std::vector<int32_t> a = test::RandomTokens(33, n_vocab, 1);
  const std::vector<int32_t> b = test::RandomTokens(5, n_vocab, 2);
  const std::vector<int32_t> table_a = {0, 1, 2};
  const std::vector<int32_t> table_b = {9};
  // a: a prefill chunk after 20 cached tokens; b: its whole prompt.
  for (Runtime* rt : {&cpu_, &gpu_}) {
    ForwardBatch first;
    first.chunks.push_back({absl::MakeConstSpan(a.data(), 20), 0, table_a, false});
    Step(*rt, first);
  }
  ForwardBatch batch;
  batch.chunks.push_back({absl::MakeConstSpan(a.data() + 20, 13), 20, table_a, true});
  batch.chunks.push_back({b, 0, table_b, true});
  const std::vector<float> cpu = Step(cpu_, batch);
  const std::vector<float> gpu = Step(gpu_, batch);
  ASSERT_EQ(cpu.size(), 2u * n_vocab);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (int s = 0; s < 2; ++s) {
    const std::vector<float> c(cpu.begin() + s * n_vocab, cpu.begin() + (s + 1) * n_vocab);
    const std::vector<float> g(gpu.begin() + s * n_vocab, gpu.begin() + (s + 1) * n_vocab);
    const Agreement ag = Compare(c, g);
    EXPECT_LE(ag.rel_error, kMaxRelError) << "sequence " << s;
    EXPECT_GE(ag.cosine, kMinCosine) << "sequence " << s;
  }
}

// Decode steps replayed from CUDA graphs give the eager runner's logits,
// across batch sizes (each its own graph) and growing contexts.
TEST_F(CudaModelRunnerTest, GraphDecodeMatchesEagerDecode) {
  Runtime graphed = Make(DeviceSpec{DeviceSpec::Kind::kCuda, 0}, 1, /*graphs=*/true);
  ASSERT_NE(graphed.runner, nullptr);
  const int n_vocab = model_->config.n_vocab;
  for (int batch : {1, 3, 8}) {
    std::vector<std::vector<int32_t>> prompts, tables;
    for (int b = 0; b < batch; ++b) {
      prompts.push_back(test::RandomTokens(10 + b, n_vocab, 100 + b));
      tables.push_back({2 * b, 2 * b + 1});
    }
    for (Runtime* rt : {&gpu_, &graphed}) {  // the same prompts in both caches
      for (int b = 0; b < batch; ++b) {
        ForwardBatch p;
        p.chunks.push_back({prompts[b], 0, tables[b], false});
        Step(*rt, p);
      }
    }
    std::vector<int32_t> next(batch, 5);
    double worst = 0;
    for (int step = 0; step < 4; ++step) {
      ForwardBatch d;
      for (int b = 0; b < batch; ++b) {
        d.chunks.push_back({absl::MakeConstSpan(&next[b], 1),
                            static_cast<int32_t>(prompts[b].size()) + step, tables[b], true});
      }
      const std::vector<float> eager = Step(gpu_, d);
      const std::vector<float> graph = Step(graphed, d);
      ASSERT_EQ(graph.size(), eager.size());
      // Relative to the largest logit: the same kernels on the same shapes
      // should agree exactly, but cuBLAS may pick another algorithm under
      // capture, which moves the last bits.
      double scale = 1e-6;
      for (float v : eager) scale = std::max(scale, std::fabs(double{v}));
      for (size_t i = 0; i < eager.size(); ++i) {
        worst = std::max(worst, std::fabs(double{eager[i]} - graph[i]) / scale);
      }
      for (int b = 0; b < batch; ++b) next[b] = Argmax(&eager[b * n_vocab], n_vocab);
    }
    std::printf("GPU_CHECK graphs batch=%d max_rel_diff=%.3g\n", batch, worst);
    EXPECT_LE(worst, 1e-4) << "batch " << batch;
  }
}

TEST_F(CudaModelRunnerTest, LayerCallbackSeesEveryLayerInOrder) {
  std::vector<int> layers;
  const std::vector<int32_t> t = test::RandomTokens(17, model_->config.n_vocab, 3);
  const std::vector<int32_t> table = {0, 1};
  ForwardBatch batch;
  batch.chunks.push_back({t, 0, table, true});
  batch.on_layer_done = [&](int l) { layers.push_back(l); };
  Step(gpu_, batch);
  ASSERT_EQ(layers.size(), static_cast<size_t>(model_->config.n_layers));
  for (size_t i = 0; i < layers.size(); ++i) EXPECT_EQ(layers[i], static_cast<int>(i));
}

TEST_F(CudaModelRunnerTest, BadInputIsRefusedAndTheRunnerKeepsWorking) {
  const std::vector<int32_t> bad = {model_->config.n_vocab};
  const std::vector<int32_t> table = {0};
  ForwardBatch batch;
  batch.chunks.push_back({bad, 0, table, true});
  std::vector<float> logits;
  EXPECT_EQ(gpu_.runner->Forward(batch, *gpu_.cache, &logits).code(),
            absl::StatusCode::kInvalidArgument);
  // A host cache is not this runner's memory.
  EXPECT_EQ(gpu_.runner->Forward(batch, *cpu_.cache, &logits).code(),
            absl::StatusCode::kFailedPrecondition);
  const std::vector<int32_t> good = {1, 2, 3};
  ForwardBatch ok;
  ok.chunks.push_back({good, 0, table, true});
  EXPECT_TRUE(gpu_.runner->Forward(ok, *gpu_.cache, &logits).ok());
  EXPECT_TRUE(gpu_.runner->Healthy().ok());
}

// The final norm scaled so that its output, the f16 input of the output
// GEMM, lies far past f16's 65504 (RMS 1e5, peaks ~2e6) yet within what the
// CPU's Q8_0 activations hold (their f16 block scale overflows past
// 65504 * 127): the kernels clamp GEMM inputs, so the logits stay finite
// instead of inf/NaN. The CPU runner on the same weights is the control.
TEST_F(CudaModelRunnerTest, ActivationsBeyondTheHalfRangeKeepTheLogitsFinite) {
  for (float& w : model_->weights.output_norm) w *= 1e5f;
  Runtime cpu = Make(DeviceSpec{}, 1);
  Runtime gpu = Make(DeviceSpec{DeviceSpec::Kind::kCuda, 0}, 1);
  ASSERT_NE(gpu.runner, nullptr);
  const std::vector<int32_t> prompt = test::RandomTokens(20, model_->config.n_vocab, 3);
  const std::vector<int32_t> table = {0, 1};
  ForwardBatch batch;
  batch.chunks.push_back({prompt, 0, table, true});
  for (Runtime* rt : {&cpu, &gpu}) {
    const std::vector<float> logits = Step(*rt, batch);
    ASSERT_EQ(logits.size(), static_cast<size_t>(model_->config.n_vocab));
    EXPECT_TRUE(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); }))
        << (rt == &gpu ? "gpu" : "cpu");
  }
}

// Host-side, so it runs without a device: a chunk asking for k rows gets
// the indices of its last k tokens in the step.
TEST(StepMetaTest, LogitRowsAreTheChunksLastTokens) {
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {5, 6, 7}, c = {8};
  const std::vector<int32_t> table = {0, 1};
  ForwardBatch batch;
  batch.chunks.push_back({a, 0, table, false});
  batch.chunks.push_back({b, 4, table, true, 3});
  batch.chunks.push_back({c, 9, table, true});
  cuda::StepMeta meta;
  meta.Build(batch);
  EXPECT_EQ(meta.logit_rows, (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(meta.ids.size(), 8u);
}

}  // namespace
}  // namespace pdserve
