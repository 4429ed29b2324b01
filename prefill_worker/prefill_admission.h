// PrefillAdmission: whether a prefill worker can start a prompt before its
// caller gives up on it. The router's Prefill call says by when the prompt
// must start (PrefillRequest.start_within_ms, within the call's deadline);
// a prompt that would still be queued behind others then is refused at
// once (RESOURCE_EXHAUSTED) instead of being computed for nothing, so the
// router moves it to another prefill worker or to the decode worker
// without waiting the time out.
//
// The estimate: the engine prefills up to `step_tokens` prompt tokens per
// step, of whichever prompts are queued, so a prompt starts in the next
// step unless more than that is admitted ahead of it; the excess drains at
// the engine's measured prefill rate (EngineLoad::prefill_tokens_per_s).
// Lenient on purpose: only prompts sure to be still waiting at their
// deadline are refused. With no rate measured yet, all are admitted.
//
// Thread-safe: the admitted-token count is atomic; calls come from gRPC
// threads, releases from the engine thread.
#ifndef PDSERVE_PREFILL_WORKER_PREFILL_ADMISSION_H_
#define PDSERVE_PREFILL_WORKER_PREFILL_ADMISSION_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace pdserve::prefill {

class PrefillAdmission {
 public:
  // Tokens one engine step prefills (--max_batch_tokens); before serving.
  void set_step_tokens(int64_t n) { step_tokens_ = n; }

  // Admits `prompt_tokens` (counted until Release) or says why not.
  // `rate` is prompt tokens per second (0: unknown); `start_by` when the
  // caller gives up on a prompt not yet started (InfiniteFuture: never).
  absl::Status Admit(int64_t prompt_tokens, double rate, absl::Time now, absl::Time start_by);
  // The admitted prompt is prefilled (or failed, or was cancelled).
  void Release(int64_t prompt_tokens);

  // Prompt tokens admitted and not yet prefilled.
  int64_t admitted_tokens() const { return admitted_.load(std::memory_order_relaxed); }
  int64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  int64_t step_tokens_ = 512;
  std::atomic<int64_t> admitted_{0};
  std::atomic<int64_t> refused_{0};
};

}  // namespace pdserve::prefill

#endif  // PDSERVE_PREFILL_WORKER_PREFILL_ADMISSION_H_
