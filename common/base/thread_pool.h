// ThreadPool: a fixed team of threads that runs one data-parallel job at a
// time, for the engine's matmuls and attention.
//
// A forward pass launches hundreds of short jobs (each tens of
// microseconds), so workers spin briefly on an atomic generation counter
// before sleeping on it (C++20 atomic wait): a condition-variable wake-up per
// job would cost more than the job. The caller waits for the team the same
// way, spinning and then sleeping, so a pool on an oversubscribed machine
// slows down in proportion instead of spinning against its own workers. The
// calling thread takes part as thread 0, so ThreadPool(1) runs everything
// inline.
//
// Thread-safety: Run() may only be called from one thread at a time (the
// engine thread that owns the pool).
#ifndef PDSERVE_COMMON_BASE_THREAD_POOL_H_
#define PDSERVE_COMMON_BASE_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace pdserve {

class ThreadPool {
 public:
  // `num_threads` counts the caller; values < 1 are treated as 1.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Runs fn(thread_index, num_threads) once on every thread and returns when
  // all have finished.
  void Run(absl::FunctionRef<void(int, int)> fn);

  // Splits [0, n) into contiguous ranges, one per thread, rounded to
  // multiples of `align`, and runs fn(begin, end) on each non-empty range.
  void ParallelFor(int64_t n, int64_t align, absl::FunctionRef<void(int64_t, int64_t)> fn);

 private:
  void WorkerLoop(int index);
  // Returns once every worker has finished the current job.
  void WaitForWorkers();

  const int num_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  // Valid while a job runs; published by the release store on generation_.
  const absl::FunctionRef<void(int, int)>* job_ = nullptr;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_BASE_THREAD_POOL_H_
