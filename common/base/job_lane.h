// JobLane: a queue of closures and the threads that run them, in order of
// posting (one thread: strictly one after another). For work that waits
// on the network — a KV commit waiting for its ack, a migration's push —
// and must stay off the engine thread.
//
// Destruction runs the jobs still queued, then joins the threads: a job
// that holds KV blocks always gets to hand them back.
//
// Thread-safety: Post from any thread.
#ifndef PDSERVE_COMMON_BASE_JOB_LANE_H_
#define PDSERVE_COMMON_BASE_JOB_LANE_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pdserve {

class JobLane {
 public:
  explicit JobLane(int num_threads);
  ~JobLane();
  JobLane(const JobLane&) = delete;
  JobLane& operator=(const JobLane&) = delete;

  void Post(std::function<void()> job);

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // set in the constructor, joined in the destructor
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_BASE_JOB_LANE_H_
