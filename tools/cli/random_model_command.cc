#include "tools/cli/random_model_command.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/base/status_macros.h"
#include "common/model/random_model.h"
#include "common/gguf/ggml_type.h"

ABSL_FLAG(std::string, out, "", "random-model: the GGUF file to write");
ABSL_FLAG(uint64_t, random_seed, 1, "random-model: seed of the weights");
ABSL_FLAG(std::string, shape, "smollm2",
          "random-model: smollm2 (SmolLM2-135M's shapes) or tiny (2 layers, width 128)");
ABSL_FLAG(std::string, dims, "",
          "random-model: override the shape as layers,embd,ff,heads,kv_heads (e.g. "
          "16,512,1536,8,4; K-quant weights need embd and ff divisible by 256)");
ABSL_FLAG(std::string, vocab_from, "",
          "random-model: copy the tokenizer of this GGUF (e.g. models/vocab/"
          "ggml-vocab-llama-spm.gguf) instead of writing a small byte-level one");
ABSL_FLAG(bool, llama3_rope_freqs, false,
          "random-model: add LLaMA 3.1's rope_freqs.weight (per-pair RoPE divisors)");
ABSL_FLAG(std::string, matrix_type, "",
          "random-model: GGML type of the 2-D weights (e.g. Q4_1, Q8_0, Q4_K, Q5_0, F16); "
          "default: the shape's own (Q4_1 for smollm2, Q8_0 for tiny)");
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
  if (const std::string dims = absl::GetFlag(FLAGS_dims); !dims.empty()) {
    std::vector<int> v;
    for (absl::string_view part : absl::StrSplit(dims, ',')) {
      int x = 0;
      if (!absl::SimpleAtoi(part, &x) || x <= 0) {
        return absl::InvalidArgumentError("random-model: --dims wants five positive integers");
      }
      v.push_back(x);
    }
    if (v.size() != 5) {
      return absl::InvalidArgumentError("random-model: --dims is layers,embd,ff,heads,kv_heads");
    }
    spec.n_layers = v[0], spec.n_embd = v[1], spec.n_ff = v[2], spec.n_heads = v[3];
    spec.n_kv_heads = v[4];
  }
  spec.vocab_from = absl::GetFlag(FLAGS_vocab_from);
  if (absl::GetFlag(FLAGS_llama3_rope_freqs)) {
    spec.rope_freq_factors = Llama3RopeFreqFactors(spec.n_embd / spec.n_heads, spec.rope_base);
  }
  spec.rope_scaling_factor = static_cast<float>(absl::GetFlag(FLAGS_rope_scaling_factor));
  if (const std::string name = absl::GetFlag(FLAGS_matrix_type); !name.empty()) {
    ASSIGN_OR_RETURN(spec.matrix_type, GgmlTypeFromName(name));
  }
  RETURN_IF_ERROR(WriteRandomModelGguf(spec, out));
  std::fprintf(stderr,
               "pdserve: wrote %s (%d layers, d=%d, ff=%d, %s, random weights, seed %llu)\n",
               out.c_str(), spec.n_layers, spec.n_embd, spec.n_ff,
               GgmlTypeName(spec.matrix_type).c_str(), static_cast<unsigned long long>(spec.seed));
  return absl::OkStatus();
}

}  // namespace pdserve
