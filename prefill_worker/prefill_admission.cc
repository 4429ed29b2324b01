#include "prefill_worker/prefill_admission.h"

#include "absl/strings/str_cat.h"

namespace pdserve::prefill {

absl::Status PrefillAdmission::Admit(int64_t prompt_tokens, double rate, absl::Time now,
                                     absl::Time start_by) {
  const int64_t ahead = admitted_.fetch_add(prompt_tokens, std::memory_order_relaxed);
  // Starting in the next step, its own compute is the router's business
  // (it watches the worker make progress). This also keeps a rate measured too low (a cold first
  // step) from refusing work for good: refusals need a queue, and a queue is being computed, which
  // measures the rate again.
  const int64_t beyond_next_step = ahead - step_tokens_;
  if (beyond_next_step <= 0 || rate <= 0 || start_by == absl::InfiniteFuture()) {
    return absl::OkStatus();
  }
  const absl::Duration wait = absl::Seconds(static_cast<double>(beyond_next_step) / rate);
  if (now + wait <= start_by) return absl::OkStatus();
  admitted_.fetch_sub(prompt_tokens, std::memory_order_relaxed);
  refused_.fetch_add(1, std::memory_order_relaxed);
  return absl::ResourceExhaustedError(
      absl::StrCat("prefill queue too long: ", ahead, " prompt tokens ahead at ~",
                   static_cast<int64_t>(rate), " tokens/s would start this one in ~",
                   absl::FormatDuration(absl::Trunc(wait, absl::Milliseconds(100))),
                   ", later than the caller waits (",
                   absl::FormatDuration(absl::Ceil(start_by - now, absl::Milliseconds(1))), ")"));
}

void PrefillAdmission::Release(int64_t prompt_tokens) {
  admitted_.fetch_sub(prompt_tokens, std::memory_order_relaxed);
}

}  // namespace pdserve::prefill
