// KvChannelThread: one NCCL connection's KvPeerChannel and a thread of its
// own on which every use of the channel runs, in submission order. Both KV
// transports keep one per nccl connection, so joining (which waits for the
// peer), sending and receiving never run on the engine's thread or on a
// transport's I/O thread, and a stalled peer holds up only its own pair.
//
// Jobs run in order. After Interrupt, the jobs still queued run with
// `cancelled` true (so they can hand back what they hold: queue slots,
// frames that pin source blocks) and must not touch the channel; then the
// channel is destroyed on this thread, which aborts it and waits for its GPU
// work, and the thread ends.
//
// Thread-safety: Submit, Interrupt, AwaitStopped and the destructor from any
// thread except this one; channel() and Adopt only inside a job.
#ifndef PDSERVE_COMMON_KV_KV_CHANNEL_THREAD_H_
#define PDSERVE_COMMON_KV_KV_CHANNEL_THREAD_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/engine/kv_cache.h"

namespace pdserve {

class KvChannelThread {
 public:
  using Job = std::function<void(bool cancelled)>;

  KvChannelThread();
  // Interrupt(), then waits for the thread.
  ~KvChannelThread();
  KvChannelThread(const KvChannelThread&) = delete;
  KvChannelThread& operator=(const KvChannelThread&) = delete;

  // Queues `job`. Once interrupted, it runs cancelled (still on the thread,
  // in order) unless the thread has already ended: then Submit returns
  // false and the job is dropped without running.
  bool Submit(Job job);
  // Idempotent. A join or a channel wait in progress returns CANCELLED
  // promptly; later jobs run cancelled.
  void Interrupt();
  // Until the thread ended: no job runs any more and the channel, with all
  // of its GPU work, is gone. Bounded by the job in progress.
  void AwaitStopped();
  bool stopped();
  // Runs `fn` once the thread has ended (the channel and its GPU work gone):
  // at once, on the caller's thread, if it already has; else on this thread
  // as its last act. For callers that must not wait (AwaitStopped) for an
  // abort, e.g. the KV receiver's I/O thread.
  void NotifyWhenStopped(std::function<void()> fn);

  // For a join in progress to watch: set by Interrupt. Lives as long as
  // this object (the channel, which may keep it, is destroyed first).
  const std::atomic<bool>* interrupted_flag() const { return &interrupted_flag_; }

  // Whether a channel was adopted (the join succeeded). Any thread.
  bool joined() const { return joined_.load(); }

  // Inside a job: the joined channel, or null before Adopt.
  KvPeerChannel* channel() { return channel_.get(); }
  // Inside a job: takes a joined channel. CANCELLED (the channel is
  // destroyed) when interrupted meanwhile.
  absl::Status Adopt(std::unique_ptr<KvPeerChannel> channel);
  // Inside a job: why there is no channel (the join's error, once set with
  // SetJoinError), for the jobs queued behind a failed join.
  void SetJoinError(absl::Status why) { join_error_ = std::move(why); }
  absl::Status join_error() const {
    return join_error_.ok() ? absl::FailedPreconditionError("kv channel: not joined") : join_error_;
  }

 private:
  void Run();

  absl::Mutex mu_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  bool interrupted_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;   // takes no more jobs
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;  // the channel is gone too
  std::vector<std::function<void()>> on_stopped_ ABSL_GUARDED_BY(mu_);
  // Set under mu_ (Adopt, and when the thread ends); read by this thread
  // without it, and by Interrupt under it.
  std::unique_ptr<KvPeerChannel> channel_;
  absl::Status join_error_;  // this thread only
  std::atomic<bool> interrupted_flag_{false};
  std::atomic<bool> joined_{false};
  std::thread thread_;  // last: it starts in the constructor
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_CHANNEL_THREAD_H_
