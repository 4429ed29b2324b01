// GenerateCall's decode watchdog (see ArmWatchdog in generate_call.h).
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "router/generate_call.h"

namespace pdserve {

void GenerateCall::ArmWatchdog(Actions* a) {
  if (watchdog_ != nullptr || terminal_) return;
  std::unique_ptr<grpc::Alarm>& alarm = watchdogs_[watchdog_slot_];
  watchdog_slot_ ^= 1;
  alarm = std::make_unique<grpc::Alarm>();
  watchdog_ = alarm.get();
  ++holds_;
  a->start_watchdog = watchdog_;
  a->watchdog_delay = env_.registry->snapshot()->stale_after;
}

grpc::Status GenerateCall::DecodeSilence(absl::Time now) const {
  // Reads paused for a slow client: the silence is ours.
  if (read_paused_) return grpc::Status::OK;
  const std::shared_ptr<const RegistrySnapshot> snapshot = env_.registry->snapshot();
  const absl::Duration quiet = now - last_decode_event_;
  if (quiet <= snapshot->stale_after) return grpc::Status::OK;
  // A worker that left the pool (DNS) may still finish its streams.
  const WorkerState* w = snapshot->FindDecode(decode_worker_.address);
  if (w == nullptr) return grpc::Status::OK;
  // Only a worker whose reports stopped as long ago counts: a load stream
  // that is merely reconnecting, or an entry re-added (no report yet),
  // says nothing about the worker.
  if (w->last_report == absl::InfinitePast()) return grpc::Status::OK;
  const absl::Duration unreported = now - w->last_report;
  if (unreported <= snapshot->stale_after) return grpc::Status::OK;
  return grpc::Status(
      grpc::StatusCode::UNAVAILABLE,
      absl::StrCat("decode worker ", decode_worker_.address, " went silent: no event for ",
                   absl::FormatDuration(absl::Trunc(quiet, absl::Milliseconds(1))),
                   ", no load report for ",
                   absl::FormatDuration(absl::Trunc(unreported, absl::Milliseconds(1)))));
}

void GenerateCall::OnWatchdog(bool fired) {
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    watchdog_ = nullptr;
    if (fired && !terminal_ && decode_active_) {
      const grpc::Status silence = DecodeSilence(absl::Now());
      if (!silence.ok()) {
        LOG(WARNING) << "[" << id_ << "] " << silence.error_message() << "; abandoning its stream";
        a.cancel_decode = decode_;
        decode_active_ = false;
        HandleDecodeEnd(silence, &a);  // fails over, or fails the request
      }
      if (!terminal_ && decode_active_) ArmWatchdog(&a);
    }
    Pump(&a);
  }
  Run(a);
  Release();
}

}  // namespace pdserve
