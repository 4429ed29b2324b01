#include "router/call/decode_stream.h"

#include <utility>

namespace pdserve::router {

DecodeStream::DecodeStream(Observer* observer, std::string address, v1::DecodeRequest request,
                           std::chrono::system_clock::time_point deadline)
    : observer_(observer), address_(std::move(address)), request_(std::move(request)) {
  context_.set_deadline(deadline);
}

void DecodeStream::Start(std::shared_ptr<v1::DecodeWorker::Stub> stub) {
  stub_ = std::move(stub);
  stub_->async()->Decode(&context_, &request_, this);
  AddHold();
  StartRead(&event_);
  StartCall();
}

void DecodeStream::Cancel() {
  // Safe before StartCall too: gRPC cancels the call as soon as it starts.
  context_.TryCancel();
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    release = paused_;
    paused_ = false;
  }
  // A paused stream has no read that could end and drop the hold.
  if (release) ReleaseHold();
}

void DecodeStream::Resume() {
  {
    absl::MutexLock lock(&mu_);
    if (!paused_) {
      // The observer asked to pause but OnReadDone has not acted on it yet.
      resume_requested_ = true;
      return;
    }
    paused_ = false;
  }
  StartRead(&event_);
}

void DecodeStream::OnReadDone(bool ok) {
  if (!ok) {
    ReleaseHold();
    return;
  }
  const bool keep_reading = observer_->OnDecodeEvent(this, event_);
  {
    absl::MutexLock lock(&mu_);
    if (!keep_reading && !cancelled_ && !resume_requested_) {
      paused_ = true;
      return;
    }
    resume_requested_ = false;
  }
  StartRead(&event_);
}

void DecodeStream::OnDone(const grpc::Status& status) { observer_->OnDecodeDone(this, status); }

void DecodeStream::ReleaseHold() {
  {
    absl::MutexLock lock(&mu_);
    if (hold_released_) return;
    hold_released_ = true;
  }
  RemoveHold();
}

}  // namespace pdserve::router
