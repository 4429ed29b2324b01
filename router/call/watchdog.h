// Watchdog: when the router's request state machine looks again at a
// request's workers, and its verdicts on what it sees. A worker that hangs
// (SIGSTOP, a wedged host) keeps its calls open but silent, so only the
// request deadline would end them. While a decode attempt runs, every
// stale_after (more often while a prefill is pending) the state machine
// asks whether both the decode stream and the decode worker's load reports
// went silent — then the attempt fails over as if the stream had broken —
// and whether the prefill worker's load reports did — then the prefill is
// retried as if it had failed with UNAVAILABLE. (A prefill worker that
// reports but computes nothing is PrefillAttempts::Stall.)
//
// A check whose timer fires more than stale_after / 2 late is skipped: the
// router itself was stalled, so no worker's silence can be judged.
//
// Not thread-safe (GenerateFsm serialises access). The verdicts are pure.
#ifndef PDSERVE_ROUTER_CALL_WATCHDOG_H_
#define PDSERVE_ROUTER_CALL_WATCHDOG_H_

#include <string>

#include "absl/time/time.h"
#include "grpcpp/support/status.h"
#include "router/pool/worker_snapshot.h"

namespace pdserve::router {

class Watchdog {
 public:
  // How long until the next check: stale_after, or while the KV of a remote
  // attempt is still pending, often enough (window / 16, at least 50 ms)
  // for a stalled prefill to be seen well before the decode worker's own
  // wait ends. `window` is --prefill_attempt_timeout_ms (0: none).
  static absl::Duration Delay(absl::Duration stale_after, absl::Duration window,
                              bool kv_pending);

  // UNAVAILABLE when the decode worker at `address` sent no event since
  // `last_event` and no load report for longer than the snapshot's
  // stale_after; OK otherwise, and always while `reads_paused` (a slow
  // client: the silence is ours).
  static grpc::Status DecodeSilence(const RegistrySnapshot& snapshot, const std::string& address,
                                    absl::Time last_event, bool reads_paused, absl::Time now);

  // UNAVAILABLE when the prefill worker at `address` sent no load report for
  // longer than stale_after: the Prefill call is unary, so the reports are
  // its only sign of life while it runs.
  static grpc::Status PrefillSilence(const RegistrySnapshot& snapshot, const std::string& address,
                                     absl::Time now);

  bool armed() const { return armed_; }
  // A check is due `delay` from `now`.
  void Arm(absl::Time now, absl::Duration delay) {
    armed_ = true;
    due_ = now + delay;
  }
  // Its timer ran (or was cancelled).
  void Disarm() { armed_ = false; }
  // How late the check that is due runs at `now`.
  absl::Duration Lateness(absl::Time now) const { return now - due_; }

 private:
  bool armed_ = false;
  absl::Time due_;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_WATCHDOG_H_
