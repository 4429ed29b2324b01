// DecodeGraphs: CUDA graphs of decode-only steps, one per batch size
// (1..kMaxBatch), captured on first use and replayed afterwards. A decode
// step is a few hundred small kernel launches (SmolLM2: ~10 per layer x 30
// layers); replaying a graph costs one launch. Graph steps run in a fixed
// arena (activations for kMaxBatch tokens at full context, metadata at
// fixed addresses), so every captured pointer stays valid and only the
// metadata's contents change between replays.
//
// Internal to common/gpu/cuda/. Not thread-safe: the runner's engine thread.
#ifndef PDSERVE_COMMON_GPU_CUDA_DECODE_GRAPHS_H_
#define PDSERVE_COMMON_GPU_CUDA_DECODE_GRAPHS_H_

#include <cuda_runtime.h>

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "common/engine/kv_cache.h"
#include "common/engine/model_runner.h"
#include "common/gpu/cuda/device_buffer.h"
#include "common/gpu/cuda/llama_kernels.h"
#include "common/gpu/cuda/step_buffers.h"

namespace pdserve::cuda {

class DecodeGraphs {
 public:
  static constexpr int kMaxBatch = 64;
  // The arena's attention scores are sized for full context; past this the
  // graphs stay off (very long-context models) rather than eat memory.
  static constexpr size_t kMaxScoreBytes = size_t{256} << 20;

  // Launches one whole step on the stream into `buffers`: embeddings,
  // layers and the logits of rows 0..rows-1 into buffers.logits.
  using EnqueueFn = std::function<absl::Status(StepBuffers& buffers, const StepTokensView& view,
                                               const int32_t* logit_rows, int64_t rows)>;

  DecodeGraphs(const ModelConfig& config, int32_t block_size, cudaStream_t stream);
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // A batch the graphs can run: one token per sequence, each wanting its
  // logits, no layer hook, at most kMaxBatch sequences, a model whose arena
  // fits kMaxScoreBytes.
  bool Eligible(const ForwardBatch& batch) const;
  // Runs an eligible, validated batch. The graphs bake in where `cache`'s
  // layers start: another pool, or another block count, than last time
  // drops the captured graphs. A capture that fails disables the graphs
  // (disabled() is then true and Eligible false): the caller runs the
  // step eagerly instead.
  absl::Status Run(const ForwardBatch& batch, KvCache& cache, const EnqueueFn& enqueue,
                   std::vector<float>* logits);
  bool disabled() const { return disabled_; }
  int32_t block_size() const { return block_size_; }

 private:
  absl::Status Init();
  void Fill(const ForwardBatch& batch);
  StepTokensView View(int n) const;
  absl::Status Capture(int n, const EnqueueFn& enqueue);
  void Clear();

  const ModelConfig config_;
  const int32_t block_size_;
  const int32_t max_blocks_;  // block table entries per sequence
  const cudaStream_t stream_;
  bool ready_ = false;
  StepBuffers arena_;
  PinnedBuffer meta_host_, logits_host_;
  DeviceBuffer meta_dev_;
  // Byte offsets of the metadata arrays (same in meta_host_ and meta_dev_).
  size_t scores_at_ = 0, ids_at_ = 0, pos_at_ = 0, table_at_ = 0, rows_at_ = 0, tables_at_ = 0;
  size_t meta_bytes_ = 0;
  std::vector<cudaGraphExec_t> execs_;  // [n - 1]
  const void* pool_ = nullptr;          // what the graphs were captured for
  int32_t pool_blocks_ = 0;
  bool disabled_ = false;
};

}  // namespace pdserve::cuda

#endif  // PDSERVE_COMMON_GPU_CUDA_DECODE_GRAPHS_H_
