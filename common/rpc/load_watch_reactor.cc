#include "common/rpc/load_watch_reactor.h"

#include <algorithm>
#include <chrono>

#include "common/rpc/raw_message.h"
#include "common/rpc/rejected_stream.h"

namespace pdserve {

grpc::ServerWriteReactor<grpc::ByteBuffer>* LoadWatchReactor::Serve(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer& body, LoadFn load) {
  v1::WatchLoadRequest request;
  if (absl::Status s = ParseRawRequest(body, context->peer(), &request); !s.ok()) {
    return new RejectedStream(ToGrpcStatus(s));
  }
  const uint32_t ms = request.interval_ms() > 0 ? std::max(request.interval_ms(), 10u) : 200u;
  return new LoadWatchReactor(std::move(load), absl::Milliseconds(ms));
}

LoadWatchReactor::LoadWatchReactor(LoadFn load, absl::Duration interval)
    : load_(std::move(load)), interval_(interval) {
  absl::MutexLock lock(&mu_);
  WriteNow();
}

void LoadWatchReactor::WriteNow() {
  report_ = SerializeRawMessage(load_());
  write_in_flight_ = true;
  StartWrite(&report_);
}

// Finish exactly once, and only when neither a write nor the alarm can
// still call back into this object.
void LoadWatchReactor::MaybeFinish() {
  if (!cancelled_ || write_in_flight_ || alarm_pending_ || finish_called_) return;
  finish_called_ = true;
  Finish(grpc::Status::CANCELLED);
}

void LoadWatchReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  write_in_flight_ = false;
  if (!ok) cancelled_ = true;
  if (cancelled_) {
    MaybeFinish();
    return;
  }
  alarm_pending_ = true;
  alarm_.Set(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(interval_),
             [this](bool fired) { OnAlarm(fired); });
}

void LoadWatchReactor::OnAlarm(bool fired) {
  absl::MutexLock lock(&mu_);
  alarm_pending_ = false;
  if (!fired || cancelled_) {
    cancelled_ = true;
    MaybeFinish();
    return;
  }
  WriteNow();
}

void LoadWatchReactor::OnCancel() {
  bool cancel_alarm = false;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    cancel_alarm = alarm_pending_;
    MaybeFinish();
  }
  // Outside the lock: the cancelled alarm runs OnAlarm(false), which takes it.
  if (cancel_alarm) alarm_.Cancel();
}

void LoadWatchReactor::OnDone() { delete this; }

}  // namespace pdserve
