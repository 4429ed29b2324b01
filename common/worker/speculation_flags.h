// The speculative-decoding flags (common/engine/speculation.h), defined once
// for the programs that decode: pdserve-decode and the `pdserve` CLI's run
// and bench-engine.
//   --speculative                 the default of requests that do not say
//   --speculative_max_draft       longest draft of one sequence in a step
//   --speculative_max_step_rows   decode rows a step holds before drafts stop
//   --speculative_suffix_tokens   recent outputs kept to draft from
#ifndef PDSERVE_COMMON_WORKER_SPECULATION_FLAGS_H_
#define PDSERVE_COMMON_WORKER_SPECULATION_FLAGS_H_

#include <cstdint>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "common/engine/speculation.h"

ABSL_DECLARE_FLAG(bool, speculative);
ABSL_DECLARE_FLAG(int32_t, speculative_max_draft);
ABSL_DECLARE_FLAG(int32_t, speculative_max_step_rows);
ABSL_DECLARE_FLAG(int64_t, speculative_suffix_tokens);

namespace pdserve {

// INVALID_ARGUMENT naming the flag when a value is out of range.
absl::StatusOr<SpeculationOptions> SpeculationOptionsFromFlags();

}  // namespace pdserve

#endif  // PDSERVE_COMMON_WORKER_SPECULATION_FLAGS_H_
