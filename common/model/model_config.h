// ModelConfig: the hyper-parameters of a decoder-only transformer, read
// from GGUF metadata as llama.cpp reads them, plus the derived sizes the
// engine and the KV layout need. Three architectures share one forward pass
// and differ only in the features below:
//  - llama (and mistral): pre-norm blocks, SiLU-gated FFN, adjacent-pair RoPE;
//  - qwen2: llama plus Q/K/V biases and NEOX RoPE (halves rotate together);
//  - gemma3: embeddings scaled by sqrt(n_embd), per-head RMSNorm of Q and K,
//    RMSNorm of the attention and FFN outputs before each residual add,
//    GELU-gated FFN, NEOX RoPE, and a local/global layer pattern: five of
//    every six layers attend a sliding window with their own RoPE base.
// A plain value type; copyable and immutable in practice.
#ifndef PDSERVE_COMMON_MODEL_MODEL_CONFIG_H_
#define PDSERVE_COMMON_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"

namespace pdserve {

enum class FfnActivation { kSilu, kGelu };

struct ModelConfig {
  std::string architecture;  // GGUF general.architecture: llama, mistral, qwen2, gemma3
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

  // Architecture features (see the file comment).
  bool rope_neox = false;        // pairs (i, i + rope_dim / 2) instead of (2i, 2i + 1)
  bool qkv_bias = false;         // blk.N.attn_{q,k,v}.bias
  bool qk_norm = false;          // blk.N.attn_{q,k}_norm.weight, per head
  bool post_norms = false;       // blk.N.post_attention_norm / post_ffw_norm
  float embed_scale = 1.0f;      // embeddings are multiplied by this
  FfnActivation ffn_activation = FfnActivation::kSilu;
  // Multiplies q.k before the softmax; 1 / sqrt(head_dim) except where an
  // architecture says otherwise.
  float attn_scale = 0.0f;
  // Where llama.cpp applies attn_scale: to q before the product (gemma3)
  // or to q.k (the others). Not the same in the last bit: q meets the f16
  // K as f16, and f16(q * s) != f16(q) * s where q * s is subnormal in f16.
  bool attn_scale_on_q = false;

  // Sliding-window attention. layer_window[l] is 0 for a layer that attends
  // the whole context, else W: position p attends positions (p - W, p].
  // Empty when no layer has a window. Local layers rotate with
  // rope_base_local instead of rope_base.
  std::vector<int> layer_window;
  float rope_base_local = 10000.0f;

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  int window(int layer) const { return layer_window.empty() ? 0 : layer_window[layer]; }
  bool has_windows() const { return !layer_window.empty(); }

  // Reads and validates the config. Architectures other than those above,
  // inconsistent shapes or RoPE scaling other than linear (YaRN, LongRoPE)
  // give FAILED_PRECONDITION naming why.
  static absl::StatusOr<ModelConfig> FromGguf(const GgufFile& gguf);
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_MODEL_MODEL_CONFIG_H_
