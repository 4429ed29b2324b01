// Test-only KvDeviceMemory: "device" memory that is really host memory, so
// CPU tests can drive every device path of the KV transports (host staging,
// CUDA IPC attach and pull) and read the result. Counts copies and fails
// them on demand. Its IPC handle is its address in this process, so two
// caches of one test process can "share" pools. The real one is
// common/gpu/cuda/cuda_kv_memory.cc.
#ifndef PDSERVE_TESTS_TESTING_FAKE_DEVICE_MEMORY_H_
#define PDSERVE_TESTS_TESTING_FAKE_DEVICE_MEMORY_H_

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/engine/kv_cache.h"
#include "glog/logging.h"
#include "gtest/gtest.h"

namespace pdserve::testing {

struct FakeDeviceCounters {
  std::atomic<int> to_host{0};
  std::atomic<int> from_host{0};
  std::atomic<int> device_copies{0};
  std::atomic<int> channel_blocks{0};  // blocks received over peer channels
  std::atomic<int> channel_waits{0};   // Wait calls that started
  std::atomic<int> joins_started{0};
  std::atomic<int> channel_sends{0};  // SendBlocks calls that put bytes out (or lost them)
  std::atomic<bool> fail_from_host{false};
  std::atomic<bool> refuse_peers{false};
  std::atomic<bool> no_channels{false};  // SupportsPeerChannels() false
  std::atomic<bool> lose_sends{false};   // channel sends never arrive
  std::atomic<int> send_delay_ms{0};     // each channel send takes this long
  // While set, a receive waits before taking its bytes (an interrupt or its
  // deadline still ends it).
  std::atomic<bool> hold_receives{false};
  std::atomic<int> channel_interrupts{0};  // Interrupt calls
  std::atomic<int> channels_closed{0};     // channel ends destroyed
  // Destroying a channel end takes this long (NCCL's abort and stream sync).
  std::atomic<int> abort_delay_ms{0};
};

// The two ends of fake peer channels, by id: each rank's inbox of messages
// (one per SendBlocks) and who has joined.
class FakeChannelHub {
 public:
  struct Pair {
    absl::Mutex mu;
    int joined = 0;  // bit per rank
    bool aborted = false;
    std::deque<std::string> inbox[2];
    int lost[2] = {0, 0};  // sends to rank r that will never be received
  };
  static FakeChannelHub& Get() {
    static FakeChannelHub* hub = new FakeChannelHub;
    return *hub;
  }
  std::string NewId() { return absl::StrCat("fake-nccl-", next_.fetch_add(1)); }
  std::shared_ptr<Pair> Find(const std::string& id) {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<Pair>& p = pairs_[id];
    if (p == nullptr) p = std::make_shared<Pair>();
    return p;
  }

 private:
  std::atomic<int> next_{1};
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Pair>> pairs_;
};

class FakePeerChannel : public KvPeerChannel {
 public:
  FakePeerChannel(std::shared_ptr<FakeChannelHub::Pair> pair, int rank,
                  FakeDeviceCounters* counters)
      : pair_(std::move(pair)), rank_(rank), counters_(counters) {}
  ~FakePeerChannel() override {
    Abort("closed");
    absl::SleepFor(absl::Milliseconds(counters_->abort_delay_ms.load()));
    ++counters_->channels_closed;
  }

  absl::Status SendBlocks(absl::Span<const uint8_t* const> blocks, size_t block_bytes) override {
    absl::SleepFor(absl::Milliseconds(counters_->send_delay_ms.load()));
    std::string msg;
    for (const uint8_t* b : blocks) msg.append(reinterpret_cast<const char*>(b), block_bytes);
    absl::MutexLock lock(&pair_->mu);
    if (pair_->aborted) return absl::AbortedError("fake channel aborted");
    if (counters_->lose_sends) {
      ++pair_->lost[1 - rank_];
    } else {
      pair_->inbox[1 - rank_].push_back(std::move(msg));
    }
    ++counters_->channel_sends;
    return absl::OkStatus();
  }
  absl::Status RecvBlocks(absl::Span<uint8_t* const> blocks, size_t block_bytes) override {
    pending_.push_back({std::vector<uint8_t*>(blocks.begin(), blocks.end()), block_bytes});
    return absl::OkStatus();
  }
  absl::Status Wait(absl::Time deadline) override {
    ++counters_->channel_waits;
    // Like NCCL, a send is finished only once the peer received it.
    {
      absl::MutexLock lock(&pair_->mu);
      FakeChannelHub::Pair* pair = pair_.get();
      const int peer = 1 - rank_;
      auto taken = [pair, peer]() {
        return pair->aborted || (pair->inbox[peer].empty() && pair->lost[peer] == 0);
      };
      if (!pair_->mu.AwaitWithDeadline(absl::Condition(&taken), deadline)) {
        pair_->aborted = true;
        return absl::DeadlineExceededError("fake channel: the peer took nothing");
      }
      if (interrupted_) return absl::CancelledError("fake channel interrupted");
      if (pair_->aborted) return absl::AbortedError("fake channel aborted");
    }
    if (!pending_.empty()) {
      if (absl::Status held = AwaitReleased(deadline); !held.ok()) {
        pending_.clear();
        return held;
      }
    }
    for (const Pending& p : pending_) {
      std::string msg;
      {
        absl::MutexLock lock(&pair_->mu);
        FakeChannelHub::Pair* pair = pair_.get();
        const int me = rank_;
        auto ready = [pair, me]() { return pair->aborted || !pair->inbox[me].empty(); };
        if (!pair_->mu.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
          pair_->aborted = true;
          pending_.clear();
          return absl::DeadlineExceededError("fake channel: nothing arrived");
        }
        if (interrupted_) {
          pending_.clear();
          return absl::CancelledError("fake channel interrupted");
        }
        if (pair_->aborted) {
          pending_.clear();
          return absl::AbortedError("fake channel aborted");
        }
        msg = std::move(pair_->inbox[me].front());
        pair_->inbox[me].pop_front();
      }
      if (msg.size() != p.blocks.size() * p.block_bytes) {
        pending_.clear();
        return absl::DataLossError("fake channel: a message of the wrong size");
      }
      for (size_t i = 0; i < p.blocks.size(); ++i) {
        if (p.blocks[i] != nullptr) {
          std::memcpy(p.blocks[i], msg.data() + i * p.block_bytes, p.block_bytes);
        }
      }
      counters_->channel_blocks += static_cast<int>(p.blocks.size());
    }
    pending_.clear();
    return absl::OkStatus();
  }
  // Until the test lets receives go on (hold_receives), unless interrupted
  // or past the deadline.
  absl::Status AwaitReleased(absl::Time deadline) {
    while (counters_->hold_receives.load()) {
      {
        absl::MutexLock lock(&pair_->mu);
        if (interrupted_) return absl::CancelledError("fake channel interrupted");
        if (pair_->aborted) return absl::AbortedError("fake channel aborted");
      }
      if (absl::Now() >= deadline) return absl::DeadlineExceededError("fake channel: held");
      absl::SleepFor(absl::Milliseconds(2));
    }
    return absl::OkStatus();
  }
  void Abort(const std::string&) override {
    absl::MutexLock lock(&pair_->mu);
    pair_->aborted = true;
  }
  void Interrupt() override {
    ++counters_->channel_interrupts;
    absl::MutexLock lock(&pair_->mu);
    interrupted_ = true;
    pair_->aborted = true;
  }

 private:
  struct Pending {
    std::vector<uint8_t*> blocks;
    size_t block_bytes;
  };
  std::shared_ptr<FakeChannelHub::Pair> pair_;
  const int rank_;
  FakeDeviceCounters* counters_;
  std::vector<Pending> pending_;
  bool interrupted_ = false;  // guarded by pair_->mu
};

class FakePeerPool : public KvPeerPool {
 public:
  FakePeerPool(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
};

class FakeDeviceMemory : public KvDeviceMemory {
 public:
  FakeDeviceMemory(size_t bytes, FakeDeviceCounters* counters)
      : bytes_(bytes), counters_(counters) {}
  uint8_t* data() const override { return const_cast<uint8_t*>(bytes_.data()); }
  size_t size() const override { return bytes_.size(); }

  absl::Status GatherToHost(absl::Span<const uint8_t* const> blocks, size_t block_bytes,
                            void* dst) const override {
    for (size_t i = 0; i < blocks.size(); ++i) {
      EXPECT_TRUE(Inside(blocks[i], block_bytes));
      std::memcpy(static_cast<uint8_t*>(dst) + i * block_bytes, blocks[i], block_bytes);
    }
    counters_->to_host += static_cast<int>(blocks.size());
    return absl::OkStatus();
  }
  absl::Status ScatterFromHost(const void* src, absl::Span<uint8_t* const> blocks,
                               size_t block_bytes) const override {
    if (counters_->fail_from_host) return absl::InternalError("fake device lost");
    for (size_t i = 0; i < blocks.size(); ++i) {
      EXPECT_TRUE(Inside(blocks[i], block_bytes));
      std::memcpy(blocks[i], static_cast<const uint8_t*>(src) + i * block_bytes, block_bytes);
    }
    counters_->from_host += static_cast<int>(blocks.size());
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExportHandle() const override {
    return absl::StrCat("fake:", reinterpret_cast<uintptr_t>(bytes_.data()));
  }
  absl::StatusOr<std::unique_ptr<KvPeerPool>> OpenPeer(const std::string& handle,
                                                       size_t bytes) const override {
    uintptr_t address = 0;
    if (counters_->refuse_peers || handle.rfind("fake:", 0) != 0 ||
        !absl::SimpleAtoi(handle.substr(5), &address)) {
      return absl::FailedPreconditionError("fake device: cannot open that handle");
    }
    return std::make_unique<FakePeerPool>(reinterpret_cast<const uint8_t*>(address), bytes);
  }
  bool SupportsPeerChannels() const override { return !counters_->no_channels; }
  absl::StatusOr<std::string> NewPeerChannelId() const override {
    return FakeChannelHub::Get().NewId();
  }
  absl::StatusOr<std::unique_ptr<KvPeerChannel>> JoinPeerChannel(
      const std::string& id, int rank, absl::Time deadline,
      const std::atomic<bool>* interrupted) const override {
    std::shared_ptr<FakeChannelHub::Pair> pair = FakeChannelHub::Get().Find(id);
    absl::MutexLock lock(&pair->mu);
    pair->joined |= 1 << rank;
    ++counters_->joins_started;
    FakeChannelHub::Pair* p = pair.get();
    auto both = [p]() { return p->joined == 3 || p->aborted; };
    // Polls the interrupt flag the way the NCCL join does.
    while (!pair->mu.AwaitWithTimeout(absl::Condition(&both), absl::Milliseconds(5))) {
      if (interrupted != nullptr && interrupted->load()) {
        pair->aborted = true;
        return absl::CancelledError("fake channel: join interrupted");
      }
      if (absl::Now() >= deadline) break;
    }
    if (p->joined != 3 || pair->aborted) {
      pair->aborted = true;
      return absl::DeadlineExceededError("fake channel: the peer did not join");
    }
    return std::unique_ptr<KvPeerChannel>(new FakePeerChannel(pair, rank, counters_));
  }
  absl::Status CopyBlocks(absl::Span<const uint8_t* const> src, absl::Span<uint8_t* const> dst,
                          size_t block_bytes) const override {
    for (size_t i = 0; i < src.size(); ++i) {
      EXPECT_TRUE(Inside(dst[i], block_bytes));
      std::memcpy(dst[i], src[i], block_bytes);
    }
    counters_->device_copies += static_cast<int>(src.size());
    return absl::OkStatus();
  }

 private:
  bool Inside(const uint8_t* p, size_t n) const {
    return p >= bytes_.data() && p + n <= bytes_.data() + bytes_.size();
  }
  std::vector<uint8_t> bytes_;
  FakeDeviceCounters* counters_;
};

// A cache of `layout` in fake device memory, every byte random.
inline std::unique_ptr<KvCache> MakeFakeDeviceCache(const KvLayout& layout, int32_t blocks,
                                                    uint32_t seed, FakeDeviceCounters* counters) {
  auto memory = std::make_unique<FakeDeviceMemory>(KvCache::PoolBytes(layout, blocks), counters);
  auto cache = KvCache::Create(layout, blocks, std::move(memory));
  CHECK(cache.ok()) << cache.status();
  std::mt19937 rng(seed);
  uint8_t* p = (*cache)->pool();
  for (size_t i = 0; i < KvCache::PoolBytes(layout, blocks); ++i)
    p[i] = static_cast<uint8_t>(rng());
  return std::move(cache).value();
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_TESTING_FAKE_DEVICE_MEMORY_H_
