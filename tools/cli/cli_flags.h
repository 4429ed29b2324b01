// Flags shared by the `pdserve` CLI's subcommands (run, bench-engine,
// generate, bench), and the helpers that turn them into engine options.
// The engine runtime flags (--threads, --device, ...) are the workers'
// (common/worker/engine_runtime_flags.h).
#ifndef PDSERVE_TOOLS_CLI_CLI_FLAGS_H_
#define PDSERVE_TOOLS_CLI_CLI_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"
#include "common/request/sampling_params.h"
#include "common/worker/engine_runtime_flags.h"

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(int32_t, max_batch_tokens);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(int32_t, max_tokens);
ABSL_DECLARE_FLAG(bool, ignore_eos);
ABSL_DECLARE_FLAG(std::string, router);
ABSL_DECLARE_FLAG(std::string, prompt);
ABSL_DECLARE_FLAG(bool, chat);
ABSL_DECLARE_FLAG(std::string, system);

namespace pdserve {

SamplingParams SamplingParamsFromFlags();

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_CLI_CLI_FLAGS_H_
