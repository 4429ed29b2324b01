// Test-only KvDeviceMemory: "device" memory that is really host memory, so
// CPU tests can drive every device path of the KV transports (host staging,
// CUDA IPC attach and pull) and read the result. Counts copies and fails
// them on demand. Its IPC handle is its address in this process, so two
// caches of one test process can "share" pools. The real one is
// common/cuda/cuda_kv_memory.cc.
#ifndef PDSERVE_TESTS_UNIT_FAKE_DEVICE_MEMORY_H_
#define PDSERVE_TESTS_UNIT_FAKE_DEVICE_MEMORY_H_

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/kv_cache.h"
#include "glog/logging.h"
#include "gtest/gtest.h"

namespace pdserve::testing {

struct FakeDeviceCounters {
  std::atomic<int> to_host{0};
  std::atomic<int> from_host{0};
  std::atomic<int> device_copies{0};
  std::atomic<bool> fail_from_host{false};
  std::atomic<bool> refuse_peers{false};
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
  for (size_t i = 0; i < KvCache::PoolBytes(layout, blocks); ++i) p[i] = static_cast<uint8_t>(rng());
  return std::move(cache).value();
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_UNIT_FAKE_DEVICE_MEMORY_H_
