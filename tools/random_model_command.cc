#include "tools/random_model_command.h"

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "common/random_model.h"
#include "common/status_macros.h"

ABSL_FLAG(std::string, out, "", "random-model: the GGUF file to write");
ABSL_FLAG(uint64_t, random_seed, 1, "random-model: seed of the weights");

namespace pdserve {

absl::Status RandomModelCommand() {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) return absl::InvalidArgumentError("random-model: --out is required");
  RandomModelSpec spec = RandomModelSpec::SmolLm2Shapes();
  spec.seed = absl::GetFlag(FLAGS_random_seed);
  RETURN_IF_ERROR(WriteRandomModelGguf(spec, out));
  std::fprintf(stderr, "pdserve: wrote %s (SmolLM2-135M shapes, random weights, seed %llu)\n",
               out.c_str(), static_cast<unsigned long long>(spec.seed));
  return absl::OkStatus();
}

}  // namespace pdserve
