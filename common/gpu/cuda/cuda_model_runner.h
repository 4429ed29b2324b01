// CudaModelRunner: the llama forward pass on one CUDA device, behind the
// same ModelRunner interface as the CPU runner (selected with
// --device=cuda:N). Weights are uploaded once as f16 (common/gpu/cuda/
// device_weights.h) and every matmul is a cuBLAS GEMM with f32 accumulation;
// RMSNorm, RoPE, SwiGLU, residual adds and paged attention (GQA, over K/V
// read through the block tables, for prefill chunks and decode tokens in
// one ragged step) are our kernels (llama_kernels.cu).
//
// The KV cache must live on the same device (KvCache::on_device(), f16).
// A CUDA error fails the step with an absl::Status; an error that poisons
// the context (a fault, a lost device) is sticky: every later Forward and
// Healthy() returns it, so the worker reports itself unhealthy.
//
// This header names no CUDA type. Not thread-safe: one engine thread drives
// a runner.
#ifndef PDSERVE_COMMON_GPU_CUDA_CUDA_MODEL_RUNNER_H_
#define PDSERVE_COMMON_GPU_CUDA_CUDA_MODEL_RUNNER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/model_runner.h"
#include "common/model/model_weights.h"

namespace pdserve::cuda {

struct CudaRunnerOptions {
  int device = 0;
  // Replay decode-only steps (up to 64 sequences) from captured CUDA graphs
  // (common/gpu/cuda/decode_graphs.h). Off by default until measured on a GPU.
  bool cuda_graphs = false;
};

class CudaModelRunner : public ModelRunner {
 public:
  static absl::StatusOr<std::unique_ptr<CudaModelRunner>> Create(const ModelConfig& config,
                                                                 const ModelWeights& weights,
                                                                 const CudaRunnerOptions& options);
  ~CudaModelRunner() override;

  const ModelConfig& config() const override;
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache,
                       std::vector<float>* logits) override;
  // OK until an error left the device unusable; then that error.
  absl::Status Healthy() const override;

  class Impl;

 private:
  explicit CudaModelRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pdserve::cuda

#endif  // PDSERVE_COMMON_GPU_CUDA_CUDA_MODEL_RUNNER_H_
