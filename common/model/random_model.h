// Writes llama-architecture GGUF files with random weights and a small
// byte-level BPE vocabulary (or the tokenizer of another GGUF). Tests use them to exercise the
// engine on any shape without the real checkpoint, and the GPU device check uses one with
// SmolLM2-135M's shapes (the real file is too large to carry there).
#ifndef PDSERVE_COMMON_MODEL_RANDOM_MODEL_H_
#define PDSERVE_COMMON_MODEL_RANDOM_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pdserve {

struct RandomModelSpec {
  int n_layers = 2;
  int n_embd = 64;
  int n_ff = 96;
  int n_heads = 4;
  int n_kv_heads = 2;
  int n_vocab = 320;  // >= 259: 3 special tokens + 256 byte tokens
  int context_length = 256;
  float rope_base = 10000.0f;
  uint32_t matrix_type = 3;  // ggml type of the 2-D weights (Q4_1)
  uint32_t embd_type = 8;    // token embedding / tied output (Q8_0)
  uint64_t seed = 1;
  // False writes a random output.weight. With a tied output the embedding
  // in the residual makes a random model repeat its last token, blind to
  // attention and RoPE; an untied one makes the logits follow the context.
  bool tied_output = true;
  // When set, the tokenizer.* metadata (and n_vocab) come from this GGUF,
  // e.g. llama.cpp's vocabulary-only fixtures, instead of the small
  // byte-level vocabulary.
  std::string vocab_from;
  // tokenizer.chat_template of the small vocabulary; empty: plain ChatML.
  std::string chat_template;
  // Written as rope_freqs.weight when not empty (rope_dim / 2 entries).
  std::vector<float> rope_freq_factors;
  float rope_scaling_factor = 0.0f;  // > 0: llama.rope.scaling.{type=linear,factor}

  // SmolLM2-135M's shapes.
  static RandomModelSpec SmolLm2Shapes();
  // Small shapes (head_dim 32, untied output) for tests against llama.cpp.
  static RandomModelSpec Tiny();
};

// LLaMA 3.1's rope_freqs.weight for `rope_dim` and `rope_base` (factor 8,
// low/high frequency factors 1 and 4, original context 8192), computed as
// the Hugging Face conversion does.
std::vector<float> Llama3RopeFreqFactors(int rope_dim, float rope_base);

// The serialised GGUF file.
absl::StatusOr<std::string> MakeRandomModelGguf(const RandomModelSpec& spec);
absl::Status WriteRandomModelGguf(const RandomModelSpec& spec, const std::string& path);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_MODEL_RANDOM_MODEL_H_
