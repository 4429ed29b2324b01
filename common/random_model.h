// Writes llama-architecture GGUF files with random weights and a small
// byte-level BPE vocabulary. Tests use them to exercise the engine on any
// shape without the real checkpoint, and the GPU device check uses one with
// SmolLM2-135M's shapes (the real file is too large to carry there).
#ifndef PDSERVE_COMMON_RANDOM_MODEL_H_
#define PDSERVE_COMMON_RANDOM_MODEL_H_

#include <cstdint>
#include <string>

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

  // SmolLM2-135M's shapes.
  static RandomModelSpec SmolLm2Shapes();
};

// The serialised GGUF file.
absl::StatusOr<std::string> MakeRandomModelGguf(const RandomModelSpec& spec);
absl::Status WriteRandomModelGguf(const RandomModelSpec& spec, const std::string& path);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RANDOM_MODEL_H_
