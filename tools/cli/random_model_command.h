// `pdserve random-model --out=F`: writes a llama GGUF with SmolLM2-135M's
// shapes and seeded random weights (common/model/random_model.h). The GPU device
// check runs on one, since the real checkpoint does not travel there.
#ifndef PDSERVE_TOOLS_CLI_RANDOM_MODEL_COMMAND_H_
#define PDSERVE_TOOLS_CLI_RANDOM_MODEL_COMMAND_H_

#include "absl/status/status.h"

namespace pdserve {

absl::Status RandomModelCommand();

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_CLI_RANDOM_MODEL_COMMAND_H_
