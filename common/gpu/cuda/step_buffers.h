// StepBuffers: the device scratch of one forward step (activations, scores,
// logits), grow-only; and StepMeta: the host-side per-token metadata of a
// step (token ids, positions, block tables) in the layout the kernels read.
// Internal to common/gpu/cuda/. Not thread-safe.
#ifndef PDSERVE_COMMON_GPU_CUDA_STEP_BUFFERS_H_
#define PDSERVE_COMMON_GPU_CUDA_STEP_BUFFERS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/engine/model_runner.h"
#include "common/gpu/cuda/device_buffer.h"
#include "common/model/model_config.h"

namespace pdserve::cuda {

struct StepBuffers {
  DeviceBuffer x, y, h, qkv, gate_up, attn, scores, logits;

  // Room for `tokens` tokens, `rows` logit rows and `score_floats` attention
  // scores. Addresses change only when a buffer grows.
  absl::Status Reserve(const ModelConfig& c, int64_t tokens, int64_t rows, int64_t score_floats);
};

struct StepMeta {
  std::vector<int32_t> ids, positions, table_offsets, tables, logit_rows;
  std::vector<int64_t> score_offsets;  // sum of (pos + 1) over earlier tokens
  int64_t total_scores = 0;            // sum of (pos + 1) over the step

  void Build(const ForwardBatch& batch);
};

}  // namespace pdserve::cuda

#endif  // PDSERVE_COMMON_GPU_CUDA_STEP_BUFFERS_H_
