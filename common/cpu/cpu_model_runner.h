// CpuModelRunner: the forward pass on the CPU (llama.cpp's build_llama, and
// its qwen2 and gemma3 variants as ModelConfig's features describe them),
// batched over a ragged set of sequence chunks, with matmuls and attention spread over a
// ThreadPool.
//
// Owns its scratch buffers, thread pool and packed weight copies; borrows
// the weights (and thus the GgufFile). Not thread-safe: one engine thread calls Forward().
#ifndef PDSERVE_COMMON_CPU_CPU_MODEL_RUNNER_H_
#define PDSERVE_COMMON_CPU_CPU_MODEL_RUNNER_H_

#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"

#include "common/base/thread_pool.h"
#include "common/cpu/attention_tile.h"
#include "common/cpu/matmul.h"
#include "common/cpu/packed_weights.h"
#include "common/engine/model_runner.h"
#include "common/model/model_weights.h"

namespace pdserve {

class CpuModelRunner : public ModelRunner {
 public:
  CpuModelRunner(const ModelConfig& config, const ModelWeights* weights, int num_threads);

  const ModelConfig& config() const override { return config_; }
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache,
                       std::vector<float>* logits) override;

 private:
  // Per-token bookkeeping of one step, flattened over chunks.
  struct TokenRef {
    int chunk;
    int32_t pos;
  };
  void PrepareStep(const ForwardBatch& batch);
  void Embed(const ForwardBatch& batch);
  void RunLayer(const ForwardBatch& batch, KvCache& cache, int layer);
  void StoreKv(const ForwardBatch& batch, KvCache& cache, int layer);
  void StoreKvInt8(const ForwardBatch& batch, KvCache& cache, int layer);
  void Attention(const ForwardBatch& batch, KvCache& cache, int layer);
  void FeedForward(int layer);
  void ApplyRope(float* rows, int n_heads, const std::vector<float>& angles);
  void ScaleQueries();
  void RmsNorm(const float* x, const std::vector<float>& w, float* out, int64_t rows);
  void AddResidual();  // x_ += h_
  void ForRows(int64_t rows, absl::FunctionRef<void(int64_t, int64_t)> fn);
  void ComputeLogits(const ForwardBatch& batch, std::vector<float>* logits);

  const ModelConfig config_;
  const ModelWeights* weights_;
  // Packed copies of the matrices, for the packed kernels of the ISA active
  // at construction; the matmuls read these instead of weights_ where present.
  const PackedModelWeights packed_;
  ThreadPool pool_;
  Matmul matmul_;

  // Step scratch, sized by the number of tokens T of the current step.
  int64_t n_tokens_ = 0;
  std::vector<TokenRef> tokens_;
  std::vector<float> rope_;        // [T][rope_dim] interleaved cos, sin
  std::vector<float> rope_local_;  // the same for local (windowed) layers
  std::vector<float> x_, h_, q_, k_, v_, attn_, gate_, up_;
  std::vector<AttentionTile> attn_tiles_;     // the step's, largest first
  std::vector<AttentionScratch> attn_scratch_;  // per thread
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_CPU_CPU_MODEL_RUNNER_H_
