#include "common/kv/kv_send_transfer.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pdserve {

absl::Status KvSendTransfer::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void KvSendTransfer::Fail(const absl::Status& status) {
  DCHECK(!status.ok());
  absl::MutexLock lock(&mu_);
  if (status_.ok() && !acked_) status_ = status;
}

void KvSendTransfer::FrameQueued(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  ++frames_in_memory_;
  queued_bytes_ += bytes;
}

void KvSendTransfer::FrameReleased() {
  absl::MutexLock lock(&mu_);
  CHECK_GT(frames_in_memory_, 0);
  --frames_in_memory_;
}

uint64_t KvSendTransfer::queued_bytes() const {
  absl::MutexLock lock(&mu_);
  return queued_bytes_;
}

void KvSendTransfer::Acked() {
  absl::MutexLock lock(&mu_);
  if (status_.ok()) acked_ = true;
}

absl::Status KvSendTransfer::AwaitAck(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return acked_ || !status_.ok(); };
  if (!mu_.AwaitWithDeadline(absl::Condition(&done), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat("kv transfer ", transfer_id_, " epoch ", epoch_,
                                                    ": no commit ack by the deadline"));
  }
  return status_;
}

void KvSendTransfer::AwaitReleased() {
  absl::MutexLock lock(&mu_);
  auto released = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return frames_in_memory_ == 0; };
  mu_.Await(absl::Condition(&released));
}

}  // namespace pdserve
