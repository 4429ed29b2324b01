#include "common/worker/speculation_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(bool, speculative, true,
          "Speculative decoding for requests that do not choose: drafts copied from the "
          "request's own tokens, verified in the batch (same output, fewer steps)");
ABSL_FLAG(int32_t, speculative_max_draft, 16, "Longest draft of one sequence in one step (1..64)");
ABSL_FLAG(int64_t, speculative_suffix_tokens, 32768,
          "Tokens of recent requests' outputs kept to draft from when a request's own text has "
          "nothing to copy (0 = none: drafts never depend on other requests)");
ABSL_FLAG(int32_t, speculative_max_step_rows, 16,
          "Most decode rows (sequences plus their drafts) a step may hold; within it each draft "
          "row is priced by the measured step cost");

namespace pdserve {

absl::StatusOr<SpeculationOptions> SpeculationOptionsFromFlags() {
  SpeculationOptions o;
  o.enabled = absl::GetFlag(FLAGS_speculative);
  o.max_draft = absl::GetFlag(FLAGS_speculative_max_draft);
  o.max_step_rows = absl::GetFlag(FLAGS_speculative_max_step_rows);
  o.suffix_cache_tokens = absl::GetFlag(FLAGS_speculative_suffix_tokens);
  if (o.max_draft < 1 || o.max_draft > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("--speculative_max_draft=", o.max_draft, " is outside [1, 64]"));
  }
  if (o.suffix_cache_tokens < 0 || o.suffix_cache_tokens > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError(absl::StrCat("--speculative_suffix_tokens=",
                                                   o.suffix_cache_tokens, " is outside [0, 2^24]"));
  }
  if (o.max_step_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--speculative_max_step_rows=", o.max_step_rows, " must be at least 1"));
  }
  return o;
}

}  // namespace pdserve
