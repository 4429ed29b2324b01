#include "common/request/sampling_params.h"

#include <cmath>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace pdserve {
namespace {

// Bounds are inclusive unless the flag says otherwise; NaN and infinities
// fail every check because each comparison is written as "value is inside".
absl::Status CheckRange(std::string_view field, float value, float lo, bool lo_open, float hi,
                        std::string_view expected) {
  const bool above_lo = lo_open ? value > lo : value >= lo;
  if (std::isfinite(value) && above_lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("sampling.%s = %g is invalid: must be %s", field, value, expected));
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& p) {
  absl::Status s =
      CheckRange("temperature", p.temperature, 0.0f, false, 100.0f, "in [0, 100] (0 = greedy)");
  if (s.ok()) s = CheckRange("top_p", p.top_p, 0.0f, true, 1.0f, "in (0, 1]");
  if (s.ok()) s = CheckRange("min_p", p.min_p, 0.0f, false, 1.0f, "in [0, 1]");
  if (s.ok()) {
    s = CheckRange("repetition_penalty", p.repetition_penalty, 0.0f, true, 10.0f,
                   "in (0, 10] (1 = off)");
  }
  if (s.ok()) {
    s = CheckRange("presence_penalty", p.presence_penalty, -2.0f, false, 2.0f, "in [-2, 2]");
  }
  if (s.ok()) {
    s = CheckRange("frequency_penalty", p.frequency_penalty, -2.0f, false, 2.0f, "in [-2, 2]");
  }
  if (!s.ok()) return s;
  if (p.top_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sampling.top_k = %d is invalid: must be >= 0 (0 = off)", p.top_k));
  }
  if (p.penalty_last_n < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sampling.penalty_last_n = %d is invalid: must be >= 0 (0 = off)", p.penalty_last_n));
  }
  if (p.logprobs < -1 || p.logprobs > kMaxLogprobs) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sampling.logprobs = %d is invalid: must be in [0, %d] (unset = none)",
                        p.logprobs, kMaxLogprobs));
  }
  if (p.constraint.has_value()) {
    const GrammarConstraint& c = *p.constraint;
    if (c.text.size() > kMaxConstraintBytes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("sampling.constraint.%s is %d bytes: at most %d are accepted",
                          GrammarKindName(c.kind), c.text.size(), kMaxConstraintBytes));
    }
    if (c.kind != GrammarKind::kJsonObject && c.text.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("sampling.constraint.%s is empty", GrammarKindName(c.kind)));
    }
  }
  return absl::OkStatus();
}

}  // namespace pdserve
