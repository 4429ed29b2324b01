#include "common/base/thread_pool.h"

#include <immintrin.h>

#include <algorithm>

namespace pdserve {
namespace {

// About 50-100 us of spinning before a worker sleeps: long enough to bridge
// the gap between consecutive jobs of one forward pass, short enough that an
// idle engine does not burn a core.
constexpr int kSpinIterations = 20000;
// Every this many pauses a spinning thread offers its core to whatever else
// is runnable there. On an idle machine the call returns at once; on an
// oversubscribed one (another process, a container's CPU quota) it lets the
// thread being waited for (this pool's, or another program's) run instead
// of the spinner, which would otherwise burn its whole scheduler slice.
constexpr int kPausesPerYield = 64;

void SpinPause(int spin) {
  if (spin % kPausesPerYield == kPausesPerYield - 1) {
    std::this_thread::yield();
  } else {
    _mm_pause();
  }
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::Run(absl::FunctionRef<void(int, int)> fn) {
  if (num_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  fn(0, num_threads_);
  WaitForWorkers();
  job_ = nullptr;
}

// Spins like the workers, then sleeps: when the machine has fewer free cores
// than threads, a worker may be off its core for a whole scheduler slice,
// and a caller spinning on through it would keep that core from the very
// worker it waits for.
void ThreadPool::WaitForWorkers() {
  int left = pending_.load(std::memory_order_acquire);
  for (int spin = 0; left != 0 && spin < kSpinIterations; ++spin) {
    SpinPause(spin);
    left = pending_.load(std::memory_order_acquire);
  }
  while (left != 0) {
    pending_.wait(left, std::memory_order_acquire);
    left = pending_.load(std::memory_order_acquire);
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t align,
                             absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  align = std::max<int64_t>(1, align);
  const int64_t units = (n + align - 1) / align;
  if (units == 1 || num_threads_ == 1) {
    fn(0, n);
    return;
  }
  Run([&](int t, int nt) {
    const int64_t begin = std::min(n, units * t / nt * align);
    const int64_t end = std::min(n, units * (t + 1) / nt * align);
    if (begin < end) fn(begin, end);
  });
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      SpinPause(spin);
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(index, num_threads_);
    // Cheap when the caller is still spinning: the library skips the
    // wake-up when nobody waits.
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace pdserve
