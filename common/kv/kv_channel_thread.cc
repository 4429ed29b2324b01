#include "common/kv/kv_channel_thread.h"

#include <utility>

namespace pdserve {

KvChannelThread::KvChannelThread() : thread_([this] { Run(); }) {}

KvChannelThread::~KvChannelThread() {
  Interrupt();
  thread_.join();
}

bool KvChannelThread::Submit(Job job) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  jobs_.push_back(std::move(job));
  return true;
}

void KvChannelThread::Interrupt() {
  absl::MutexLock lock(&mu_);
  if (interrupted_) return;
  interrupted_ = true;
  interrupted_flag_.store(true);
  if (channel_ != nullptr) channel_->Interrupt();
}

void KvChannelThread::AwaitStopped() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&stopped_));
}

void KvChannelThread::NotifyWhenStopped(std::function<void()> fn) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopped_) {
      on_stopped_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

bool KvChannelThread::stopped() {
  absl::MutexLock lock(&mu_);
  return stopped_;
}

absl::Status KvChannelThread::Adopt(std::unique_ptr<KvPeerChannel> channel) {
  absl::MutexLock lock(&mu_);
  if (interrupted_) return absl::CancelledError("kv channel: interrupted while joining");
  channel_ = std::move(channel);
  joined_.store(true);
  return absl::OkStatus();
}

void KvChannelThread::Run() {
  while (true) {
    Job job;
    bool cancelled = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return interrupted_ || !jobs_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (jobs_.empty()) {  // interrupted, and nothing left to hand back
        closed_ = true;
        break;
      }
      job = std::move(jobs_.front());
      jobs_.pop_front();
      cancelled = interrupted_;
    }
    job(cancelled);
  }
  std::unique_ptr<KvPeerChannel> channel;
  {
    absl::MutexLock lock(&mu_);
    channel = std::move(channel_);
  }
  channel.reset();  // aborts the communicator and waits for its stream
  std::vector<std::function<void()>> on_stopped;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    on_stopped.swap(on_stopped_);
  }
  for (std::function<void()>& fn : on_stopped) fn();
}

}  // namespace pdserve
