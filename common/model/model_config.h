// ModelConfig: the hyper-parameters of a llama-family model, read from GGUF
// metadata, plus the derived sizes the engine and the KV layout need.
// A plain value type; copyable and immutable in practice.
#ifndef PDSERVE_COMMON_MODEL_MODEL_CONFIG_H_
#define PDSERVE_COMMON_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"

namespace pdserve {

struct ModelConfig {
  std::string architecture;  // "llama" (GGUF general.architecture)
  std::string name;          // general.name, for logs
  int n_layers = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int n_vocab = 0;
  int context_length = 0;
  int rope_dim = 0;
  float rope_base = 10000.0f;
  // Linear RoPE scaling: angles are multiplied by 1 / rope.scaling.factor.
  float rope_freq_scale = 1.0f;
  // rope_freqs.weight (LLaMA 3.1 and later): pair i's angle is divided by
  // factor i. Empty when the model has none. rope_dim / 2 entries otherwise.
  std::vector<float> rope_freq_factors;
  float rms_eps = 1e-5f;
  bool tied_output = false;  // no output.weight: token_embd doubles as it

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }

  // Reads and validates the config. Architectures other than the llama
  // family, inconsistent shapes or RoPE scaling other than linear (YaRN,
  // LongRoPE) give FAILED_PRECONDITION naming why.
  static absl::StatusOr<ModelConfig> FromGguf(const GgufFile& gguf);
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_MODEL_MODEL_CONFIG_H_
