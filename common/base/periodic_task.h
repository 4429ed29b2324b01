// PeriodicTask: runs a function every `interval` on a thread of its own,
// until destroyed (the destructor waits for a run in progress). For
// housekeeping that has no event to hang on, such as lapsing migration
// offers nobody took.
//
// Thread-safety: construct and destroy from one thread; `fn` runs on the
// task's thread.
#ifndef PDSERVE_COMMON_BASE_PERIODIC_TASK_H_
#define PDSERVE_COMMON_BASE_PERIODIC_TASK_H_

#include <functional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace pdserve {

class PeriodicTask {
 public:
  PeriodicTask(absl::Duration interval, std::function<void()> fn);
  ~PeriodicTask();
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

 private:
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_BASE_PERIODIC_TASK_H_
