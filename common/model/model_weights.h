// ModelWeights: typed views of a model's tensors inside a
// GgufFile. Matrices are not copied (they point into the mmapped file);
// only the small norm vectors are converted to owned f32 arrays.
// Immutable after Load(); safe to share across threads. The GgufFile must
// outlive it.
#ifndef PDSERVE_COMMON_MODEL_MODEL_WEIGHTS_H_
#define PDSERVE_COMMON_MODEL_MODEL_WEIGHTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "common/model/model_config.h"

namespace pdserve {

// A 2-D weight with ggml dims {in, out}: row r (out index) holds `in`
// elements in `type`'s block format; y[r] = dot(row r, x).
struct WeightMatrix {
  uint32_t type = 0;
  int64_t in = 0;
  int64_t out = 0;
  int64_t row_bytes = 0;
  const uint8_t* data = nullptr;

  const uint8_t* row(int64_t r) const { return data + r * row_bytes; }
};

struct LayerWeights {
  std::vector<float> attn_norm;
  std::vector<float> ffn_norm;
  WeightMatrix wq, wk, wv, wo;
  WeightMatrix w_gate, w_up, w_down;
  // Empty unless the architecture has them (ModelConfig's feature flags).
  std::vector<float> bq, bk, bv;                    // qkv_bias
  std::vector<float> q_norm, k_norm;                // qk_norm: head_dim each
  std::vector<float> post_attn_norm, post_ffn_norm;  // post_norms
};

struct ModelWeights {
  WeightMatrix token_embd;
  WeightMatrix output;  // == token_embd for tied models
  std::vector<float> output_norm;
  std::vector<LayerWeights> layers;

  // Binds and validates every tensor the forward pass of `config`'s
  // architecture needs: shapes must match, types must have kernels, and a
  // tensor the pass would not read is refused. Errors name the tensor.
  static absl::StatusOr<ModelWeights> Load(const GgufFile& gguf, const ModelConfig& config);
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_MODEL_MODEL_WEIGHTS_H_
