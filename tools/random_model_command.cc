#include "tools/random_model_command.h"

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "common/random_model.h"
#include "common/status_macros.h"

ABSL_FLAG(std::string, out, "", "random-model: the GGUF file to write");
ABSL_FLAG(uint64_t, random_seed, 1, "random-model: seed of the weights");
ABSL_FLAG(std::string, shape, "smollm2",
          "random-model: smollm2 (SmolLM2-135M's shapes) or tiny (2 layers, width 128)");
ABSL_FLAG(std::string, vocab_from, "",
          "random-model: copy the tokenizer of this GGUF (e.g. models/vocab/"
          "ggml-vocab-llama-spm.gguf) instead of writing a small byte-level one");
ABSL_FLAG(bool, llama3_rope_freqs, false,
          "random-model: add LLaMA 3.1's rope_freqs.weight (per-pair RoPE divisors)");
ABSL_FLAG(double, rope_scaling_factor, 0.0,
          "random-model: > 0 writes linear RoPE scaling with this factor");

namespace pdserve {

absl::Status RandomModelCommand() {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) return absl::InvalidArgumentError("random-model: --out is required");
  const std::string shape = absl::GetFlag(FLAGS_shape);
  if (shape != "smollm2" && shape != "tiny") {
    return absl::InvalidArgumentError("random-model: --shape is smollm2 or tiny");
  }
  RandomModelSpec spec =
      shape == "tiny" ? RandomModelSpec::Tiny() : RandomModelSpec::SmolLm2Shapes();
  spec.seed = absl::GetFlag(FLAGS_random_seed);
  spec.vocab_from = absl::GetFlag(FLAGS_vocab_from);
  if (absl::GetFlag(FLAGS_llama3_rope_freqs)) {
    spec.rope_freq_factors = Llama3RopeFreqFactors(spec.n_embd / spec.n_heads, spec.rope_base);
  }
  spec.rope_scaling_factor = static_cast<float>(absl::GetFlag(FLAGS_rope_scaling_factor));
  RETURN_IF_ERROR(WriteRandomModelGguf(spec, out));
  std::fprintf(stderr, "pdserve: wrote %s (%s shapes, random weights, seed %llu)\n", out.c_str(),
               shape.c_str(), static_cast<unsigned long long>(spec.seed));
  return absl::OkStatus();
}

}  // namespace pdserve
