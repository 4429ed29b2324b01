// KvSendTransfer: the sender's view of one (transfer_id, epoch) in flight:
// its first error, how many queued frames still point into the caller's
// KvCache blocks, the bytes queued, and D's ack. Shared between the caller
// (SendLayer / Commit / Abort) and the sender's I/O thread.
//
// Thread-safe.
#ifndef PDSERVE_COMMON_KV_KV_SEND_TRANSFER_H_
#define PDSERVE_COMMON_KV_KV_SEND_TRANSFER_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pdserve {

class KvSendTransfer {
 public:
  KvSendTransfer(uint64_t transfer_id, uint64_t epoch) : transfer_id_(transfer_id), epoch_(epoch) {}

  uint64_t transfer_id() const { return transfer_id_; }
  uint64_t epoch() const { return epoch_; }

  // OK while healthy, else the first failure.
  absl::Status status() const;
  // Records a failure; the first one wins.
  void Fail(const absl::Status& status);

  // A layer frame of `bytes` payload was queued; it references source
  // memory until FrameReleased().
  void FrameQueued(uint64_t bytes);
  void FrameReleased();
  uint64_t queued_bytes() const;

  // D accepted the commit.
  void Acked();

  // Until Acked(), a failure, or the deadline: OK, the failure, or
  // DEADLINE_EXCEEDED.
  absl::Status AwaitAck(absl::Time deadline);
  // Until no frame references source memory. The I/O thread releases frames
  // without waiting on any peer, so this is short.
  void AwaitReleased();

 private:
  const uint64_t transfer_id_;
  const uint64_t epoch_;
  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  int64_t frames_in_memory_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool acked_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_SEND_TRANSFER_H_
