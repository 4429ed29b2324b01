#include "common/base/job_lane.h"

#include <utility>

namespace pdserve {

JobLane::JobLane(int num_threads) {
  for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this] { Loop(); });
}

JobLane::~JobLane() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void JobLane::Post(std::function<void()> job) {
  absl::MutexLock lock(&mu_);
  jobs_.push_back(std::move(job));
}

void JobLane::Loop() {
  while (true) {
    std::function<void()> job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !jobs_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace pdserve
