// GenerateCall's decode watchdog (see ArmWatchdog in generate_call.h).
#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "router/generate_call.h"

namespace pdserve::router {

void GenerateCall::ArmWatchdog(Actions* a) {
  if (watchdog_ != nullptr || terminal_) return;
  std::unique_ptr<grpc::Alarm>& alarm = watchdogs_[watchdog_slot_];
  watchdog_slot_ ^= 1;
  alarm = std::make_unique<grpc::Alarm>();
  watchdog_ = alarm.get();
  ++holds_;
  a->start_watchdog = watchdog_;
  a->watchdog_delay = WatchdogDelay();
  watchdog_due_ = absl::Now() + a->watchdog_delay;
}

absl::Duration GenerateCall::WatchdogDelay() const {
  const absl::Duration stale_after = env_.registry->snapshot()->stale_after;
  const absl::Duration window = retry_.prefill_attempt_timeout;
  // Until the KV is committed, look often enough for a stalled prefill to be
  // seen within a sixteenth of its window after the report that showed it
  // (every load_poll_ms), so it is given up on before the decode worker's
  // wait (4/3 of the window from the last frame) ends.
  if (local_prefill_ || kv_committed_ || window <= absl::ZeroDuration()) return stale_after;
  return std::min(std::max(window / 16, absl::Milliseconds(50)), stale_after);
}

namespace {

// How long `w` has sent no load report, when that is longer than
// `stale_after`. A worker that left the pool (DNS) may still finish its
// calls, and a load stream that is merely reconnecting, or an entry
// re-added (no report yet), says nothing about the worker.
std::optional<absl::Duration> Unreported(const WorkerState* w, absl::Duration stale_after,
                                         absl::Time now) {
  if (w == nullptr || w->last_report == absl::InfinitePast()) return std::nullopt;
  const absl::Duration unreported = now - w->last_report;
  if (unreported <= stale_after) return std::nullopt;
  return unreported;
}

std::string Ms(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

}  // namespace

grpc::Status GenerateCall::DecodeSilence(absl::Time now) const {
  // Reads paused for a slow client: the silence is ours.
  if (read_paused_) return grpc::Status::OK;
  const std::shared_ptr<const RegistrySnapshot> snapshot = env_.registry->snapshot();
  const absl::Duration quiet = now - last_decode_event_;
  if (quiet <= snapshot->stale_after) return grpc::Status::OK;
  const std::optional<absl::Duration> unreported =
      Unreported(snapshot->FindDecode(decode_worker_.address), snapshot->stale_after, now);
  if (!unreported.has_value()) return grpc::Status::OK;
  return grpc::Status(
      grpc::StatusCode::UNAVAILABLE,
      absl::StrCat("decode worker ", decode_worker_.address, " went silent: no event for ",
                   Ms(quiet), ", no load report for ", Ms(*unreported)));
}

grpc::Status GenerateCall::PrefillSilence(const RegistrySnapshot& snapshot, absl::Time now) const {
  // The Prefill call is unary: the worker's load reports are its only sign
  // of life while it runs.
  const std::optional<absl::Duration> unreported =
      Unreported(snapshot.FindPrefill(prefill_->address()), snapshot.stale_after, now);
  if (!unreported.has_value()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      absl::StrCat("prefill worker ", prefill_->address(),
                                   " went silent: no load report for ", Ms(*unreported)));
}

grpc::Status GenerateCall::PrefillStall(const RegistrySnapshot& snapshot, absl::Time now) {
  const absl::Duration window = retry_.prefill_attempt_timeout;
  if (window <= absl::ZeroDuration()) return grpc::Status::OK;
  const WorkerState* w = snapshot.FindPrefill(prefill_->address());
  // Any prompt computed counts, ours or one queued ahead of it: admission
  // (start_within_ms) already bounds how long ours waits behind others.
  if (w != nullptr && w->load.prefill_progress() != prefill_progress_) {
    prefill_progress_ = w->load.prefill_progress();
    prefill_progress_at_ = now;
    return grpc::Status::OK;
  }
  const absl::Duration still = now - prefill_progress_at_;
  if (still < window) return grpc::Status::OK;
  return grpc::Status(
      grpc::StatusCode::DEADLINE_EXCEEDED,
      absl::StrCat("prefill worker ", prefill_->address(), " computed no prompt token for ",
                   Ms(still), " (--prefill_attempt_timeout_ms)"));
}

void GenerateCall::CheckDecodeSilence(Actions* a) {
  if (!decode_active_) return;
  const grpc::Status silence = DecodeSilence(absl::Now());
  if (silence.ok()) return;
  LOG(WARNING) << "[" << id_ << "] " << silence.error_message() << "; abandoning its stream";
  a->cancel_decode = decode_;
  decode_active_ = false;
  HandleDecodeEnd(silence, a);  // fails over, or fails the request
}

void GenerateCall::CheckPrefillSilence(Actions* a) {
  if (!prefill_in_flight_ || kv_committed_) return;
  const absl::Time now = absl::Now();
  const std::shared_ptr<const RegistrySnapshot> snapshot = env_.registry->snapshot();
  grpc::Status silence = PrefillSilence(*snapshot, now);
  if (silence.ok()) silence = PrefillStall(*snapshot, now);
  if (silence.ok()) return;
  LOG(WARNING) << "[" << id_ << "] " << silence.error_message() << "; abandoning its prefill";
  a->cancel_prefill = prefill_;
  prefill_in_flight_ = false;
  prefill_ok_ = false;
  HandlePrefillFailure(silence, a);  // retries on another prefill worker, or fails
  MaybeComplete(a);
}

void GenerateCall::OnWatchdog(bool fired) {
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    watchdog_ = nullptr;
    if (fired && !terminal_) {
      // An alarm this late means the router itself was stalled (stopped,
      // starved of CPU, a paused VM): the workers' streams and reports
      // were not read either, so their silence says nothing this time.
      const absl::Duration late = absl::Now() - watchdog_due_;
      if (late > env_.registry->snapshot()->stale_after / 2) {
        LOG(WARNING) << "[" << id_ << "] watchdog ran "
                     << absl::FormatDuration(absl::Trunc(late, absl::Milliseconds(1)))
                     << " late: the router was stalled; not judging worker silence this round";
      } else {
        CheckPrefillSilence(&a);
        if (!terminal_) CheckDecodeSilence(&a);
      }
      if (!terminal_ && decode_active_) ArmWatchdog(&a);
    }
    Pump(&a);
  }
  Run(a);
  Release();
}

}  // namespace pdserve::router
