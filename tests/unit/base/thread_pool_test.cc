#include "common/base/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace pdserve {
namespace {

TEST(ThreadPoolTest, ClampsThreadCount) {
  EXPECT_EQ(ThreadPool(0).num_threads(), 1);
  EXPECT_EQ(ThreadPool(-3).num_threads(), 1);
  EXPECT_EQ(ThreadPool(1).num_threads(), 1);
  EXPECT_EQ(ThreadPool(4).num_threads(), 4);
}

TEST(ThreadPoolTest, RunVisitsEveryThreadIndexOnce) {
  for (int n : {1, 2, 3, 5, 8}) {
    ThreadPool pool(n);
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> bad_count{0};
      pool.Run([&](int t, int nt) {
        if (nt != n || t < 0 || t >= n) {
          bad_count.fetch_add(1);
          return;
        }
        hits[t].fetch_add(1);
      });
      EXPECT_EQ(bad_count.load(), 0);
      for (int t = 0; t < n; ++t) EXPECT_EQ(hits[t].load(), 1) << "n " << n << " t " << t;
    }
  }
}

TEST(ThreadPoolTest, RunUsesDistinctThreadsAndTheCallerAsThreadZero) {
  ThreadPool pool(4);
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::thread::id zero;
  pool.Run([&](int t, int) {
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
    if (t == 0) zero = std::this_thread::get_id();
  });
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(zero, std::this_thread::get_id());
}

TEST(ThreadPoolTest, SingleThreadRunsInline) {
  ThreadPool pool(1);
  std::thread::id seen;
  int calls = 0;
  pool.Run([&](int t, int nt) {
    EXPECT_EQ(t, 0);
    EXPECT_EQ(nt, 1);
    seen = std::this_thread::get_id();
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, std::this_thread::get_id());
  int64_t covered = 0;
  pool.ParallelFor(100, 8, [&](int64_t b, int64_t e) {
    EXPECT_EQ(std::this_thread::get_id(), seen);
    covered += e - b;
  });
  EXPECT_EQ(covered, 100);
}

TEST(ThreadPoolTest, ParallelForCoversRangeExactlyOnceWithAlignment) {
  for (int threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 63, 64, 100, 257, 1000, 4099}) {
      for (int64_t align : {0, 1, 2, 3, 4, 16, 32, 1000, 5000}) {
        SCOPED_TRACE(testing::Message()
                     << "threads " << threads << " n " << n << " align " << align);
        std::vector<std::atomic<int>> hits(n);
        std::mutex mu;
        std::vector<std::pair<int64_t, int64_t>> ranges;
        pool.ParallelFor(n, align, [&](int64_t b, int64_t e) {
          {
            std::lock_guard<std::mutex> lock(mu);
            ranges.emplace_back(b, e);
          }
          for (int64_t i = b; i < e; ++i) {
            if (i >= 0 && i < n) hits[i].fetch_add(1);
          }
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i;
        const int64_t a = std::max<int64_t>(1, align);
        EXPECT_LE(static_cast<int>(ranges.size()), threads);
        for (const auto& [b, e] : ranges) {
          EXPECT_LT(b, e) << "empty range passed to fn";
          EXPECT_GE(b, 0);
          EXPECT_LE(e, n);
          EXPECT_EQ(b % a, 0) << "range start " << b << " not aligned";
          EXPECT_TRUE(e == n || e % a == 0) << "range end " << e << " not aligned";
        }
      }
    }
  }
}

TEST(ThreadPoolTest, ParallelForSplitsWorkAcrossThreads) {
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  pool.ParallelFor(4096, 4, [&](int64_t, int64_t) { calls.fetch_add(1); });
  EXPECT_EQ(calls.load(), 4);
}

TEST(ThreadPoolTest, ThousandsOfConsecutiveRunsLoseNoWakeUps) {
  // More threads than cores makes every Run wait for the OS scheduler, so
  // the oversubscribed pools get fewer repetitions.
  for (const auto [threads, reps] : {std::pair{2, 3000}, std::pair{3, 300}, std::pair{8, 100}}) {
    ThreadPool pool(threads);
    int64_t total = 0;
    for (int rep = 0; rep < reps; ++rep) {
      std::atomic<int64_t> sum{0};
      pool.Run([&](int t, int) { sum.fetch_add(t + 1); });
      ASSERT_EQ(sum.load(), threads * (threads + 1) / 2) << "rep " << rep;
      total += sum.load();
    }
    EXPECT_EQ(total, int64_t{reps} * threads * (threads + 1) / 2);
  }
}

TEST(ThreadPoolTest, RunsSeparatedByIdleGapsStillWake) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 5; ++rep) {
    // Long enough for workers to stop spinning and sleep on the counter.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    std::atomic<int> count{0};
    pool.Run([&](int, int) { count.fetch_add(1); });
    EXPECT_EQ(count.load(), 3);
  }
}

TEST(ThreadPoolTest, JobWritesAreVisibleAfterRun) {
  ThreadPool pool(4);
  std::vector<int64_t> out(4000);  // plain (non-atomic) writes
  for (int rep = 0; rep < 200; ++rep) {
    pool.ParallelFor(static_cast<int64_t>(out.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = i * rep;
    });
    for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) ASSERT_EQ(out[i], i * rep);
  }
}

TEST(ThreadPoolTest, DestructionWhileIdle) {
  for (int rep = 0; rep < 50; ++rep) {
    auto pool = std::make_unique<ThreadPool>(1 + rep % 5);
    if (rep % 2 == 0) {
      std::atomic<int> n{0};
      pool->Run([&](int, int) { n.fetch_add(1); });
      EXPECT_EQ(n.load(), pool->num_threads());
    }
    if (rep % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    pool.reset();  // must join promptly, spinning or sleeping
  }
}

}  // namespace
}  // namespace pdserve
