#include "common/base/periodic_task.h"

#include <utility>

namespace pdserve {

PeriodicTask::PeriodicTask(absl::Duration interval, std::function<void()> fn)
    : thread_([this, interval, fn = std::move(fn)] {
        while (!stop_.WaitForNotificationWithTimeout(interval)) fn();
      }) {}

PeriodicTask::~PeriodicTask() {
  stop_.Notify();
  thread_.join();
}

}  // namespace pdserve
