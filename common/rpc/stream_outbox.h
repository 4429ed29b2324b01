// StreamOutbox: the thread-safe front of a server-streaming reactor.
//
// Events for a stream are produced on threads gRPC does not know (the
// engine thread, the KV transport's I/O thread). They Push() messages and
// finally Close() with a status; the outbox writes them one at a time (gRPC
// allows one outstanding write) and calls Finish() after the last one.
//
// Lifetime: producers hold a shared_ptr<StreamOutbox>; the reactor detaches
// in its OnDone(), after which Push/Close are no-ops. So a producer never
// touches a deleted reactor, whatever order events and cancellations race in.
// gRPC calls are made without holding mu_, so reactions that run inline
// cannot deadlock.
#ifndef PDSERVE_COMMON_RPC_STREAM_OUTBOX_H_
#define PDSERVE_COMMON_RPC_STREAM_OUTBOX_H_

#include <grpcpp/support/server_callback.h>

#include <deque>
#include <functional>
#include <optional>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace pdserve {

template <typename Msg>
class StreamOutbox {
 public:
  explicit StreamOutbox(grpc::ServerWriteReactor<Msg>* reactor) : reactor_(reactor) {}

  // Queues a message. Returns false once the stream is closing or gone.
  bool Push(Msg msg) {
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr || closing_) return false;
      queue_.push_back(std::move(msg));
    }
    Pump();
    return true;
  }

  // Ends the stream with `status` once queued messages are written. Only the
  // first Close counts.
  void Close(grpc::Status status) {
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr || closing_) return;
      closing_ = true;
      status_ = std::move(status);
    }
    Pump();
  }

  bool closing() const {
    absl::MutexLock lock(&mu_);
    return closing_;
  }

  // Messages queued or being written: how far the reader lags.
  size_t backlog() const {
    absl::MutexLock lock(&mu_);
    return queue_.size() + (writing_ ? 1 : 0);
  }

  // Back pressure: `fn` runs once, from the write completion that brings
  // the backlog down to `low` or below (on gRPC's thread; it must not
  // block), or at once if it already is. Replaces an earlier one not run.
  void OnDrained(size_t low, std::function<void()> fn) {
    {
      absl::MutexLock lock(&mu_);
      if (queue_.size() > low) {
        drained_low_ = low;
        on_drained_ = std::move(fn);
        return;
      }
      on_drained_ = nullptr;
    }
    fn();
  }

  // From the reactor's OnWriteDone.
  void WriteDone(bool ok) {
    std::function<void()> drained;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok && !closing_) {
        closing_ = true;
        status_ = grpc::Status(grpc::StatusCode::CANCELLED, "stream write failed");
        queue_.clear();
      }
      if (on_drained_ && queue_.size() <= drained_low_) drained = std::exchange(on_drained_, {});
    }
    if (drained) drained();
    Pump();
  }

  // From the reactor's OnDone: nothing may touch the reactor afterwards.
  void Detach() {
    absl::MutexLock lock(&mu_);
    reactor_ = nullptr;
    queue_.clear();
  }

 private:
  // Starts the next write, or the Finish, if none is in progress.
  void Pump() {
    grpc::ServerWriteReactor<Msg>* reactor = nullptr;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr || writing_ || finished_) return;
      if (!queue_.empty()) {
        current_ = std::move(queue_.front());
        queue_.pop_front();
        writing_ = true;
      } else if (closing_) {
        finished_ = true;
        finish = true;
      } else {
        return;
      }
      reactor = reactor_;
    }
    if (finish) {
      reactor->Finish(status_);
    } else {
      reactor->StartWrite(&current_);
    }
  }

  mutable absl::Mutex mu_;
  grpc::ServerWriteReactor<Msg>* reactor_ ABSL_GUARDED_BY(mu_);
  std::deque<Msg> queue_ ABSL_GUARDED_BY(mu_);
  Msg current_;  // owned by the write in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  size_t drained_low_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> on_drained_ ABSL_GUARDED_BY(mu_);
  grpc::Status status_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RPC_STREAM_OUTBOX_H_
