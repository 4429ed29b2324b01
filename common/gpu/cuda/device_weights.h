// DeviceWeights: a model's weights uploaded once to one device, as f16
// matrices for cuBLAS (dequantised from any GGUF type on the host) and f32
// norm and bias vectors. Q, K and V are fused into one matrix, and so are gate and
// up, so each becomes a single GEMM. Internal to common/gpu/cuda/.
//
// Owns its device memory; immutable after Upload(); not copyable.
#ifndef PDSERVE_COMMON_GPU_CUDA_DEVICE_WEIGHTS_H_
#define PDSERVE_COMMON_GPU_CUDA_DEVICE_WEIGHTS_H_

#include <cuda_fp16.h>

#include <vector>

#include "absl/status/statusor.h"
#include "common/gpu/cuda/device_buffer.h"
#include "common/model/model_config.h"
#include "common/model/model_weights.h"

namespace pdserve::cuda {

// Row-major [out][in] f16.
struct DeviceMatrix {
  DeviceBuffer data;
  int64_t in = 0;
  int64_t out = 0;
  const __half* get() const { return data.get<const __half>(); }
};

struct DeviceLayerWeights {
  DeviceBuffer attn_norm, ffn_norm;  // f32 [n_embd]
  // Present only where ModelConfig says so (empty buffers otherwise).
  DeviceBuffer bqkv;                            // qkv_bias: [q_dim + 2 kv_dim], q|k|v
  DeviceBuffer q_norm, k_norm;                  // qk_norm: [head_dim] each
  DeviceBuffer post_attn_norm, post_ffn_norm;   // post_norms: [n_embd] each
  DeviceMatrix wqkv;                 // [q_dim + 2 kv_dim][n_embd]
  DeviceMatrix wo;                   // [n_embd][q_dim]
  DeviceMatrix w_gate_up;            // [2 n_ff][n_embd]
  DeviceMatrix w_down;               // [n_embd][n_ff]
};

struct DeviceWeights {
  DeviceMatrix token_embd;  // [n_vocab][n_embd]
  DeviceMatrix output;      // empty when tied: use token_embd
  DeviceBuffer output_norm;
  DeviceBuffer rope_freq_factors;  // empty when the model has none
  std::vector<DeviceLayerWeights> layers;
  bool tied_output = false;

  const DeviceMatrix& output_matrix() const { return tied_output ? token_embd : output; }
  // Device bytes held, for logs and the bandwidth figures of the benchmark.
  size_t bytes() const;

  // Must run with the target device current.
  static absl::StatusOr<DeviceWeights> Upload(const ModelConfig& config,
                                              const ModelWeights& weights);
};

}  // namespace pdserve::cuda

#endif  // PDSERVE_COMMON_GPU_CUDA_DEVICE_WEIGHTS_H_
