// Helpers for KV transport tests: small caches with known bytes, a probe
// that records on_done calls, and a raw TCP client that writes hand-made
// frames (the fault injector: the real sender never writes a bad frame).
#ifndef PDSERVE_TESTS_TESTING_KV_TEST_UTIL_H_
#define PDSERVE_TESTS_TESTING_KV_TEST_UTIL_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/engine/kv_cache.h"
#include "common/kv/kv_frame.h"
#include "common/kv/kv_transport.h"
#include "glog/logging.h"
#include "gtest/gtest.h"

namespace pdserve::testing {

// 3 layers, 128 bytes per layer-block: big enough to see misplaced bytes,
// small enough that every test byte is checked.
inline KvLayout SmallKvLayout() {
  KvLayout layout;
  layout.n_layers = 3;
  layout.n_kv_heads = 2;
  layout.head_dim = 4;
  layout.block_size = 4;
  return layout;
}

inline std::unique_ptr<KvCache> MakeCache(int32_t blocks, uint8_t fill) {
  auto cache = KvCache::Create(SmallKvLayout(), blocks);
  CHECK(cache.ok()) << cache.status();
  const size_t bytes = static_cast<size_t>((*cache)->layout().bytes_per_layer_block());
  for (int l = 0; l < (*cache)->layout().n_layers; ++l) {
    for (int32_t b = 0; b < blocks; ++b) memset((*cache)->LayerBlock(l, b), fill, bytes);
  }
  return std::move(cache).value();
}

inline std::unique_ptr<KvCache> MakeRandomCache(int32_t blocks, uint32_t seed) {
  auto cache = MakeCache(blocks, 0);
  std::mt19937 rng(seed);
  const size_t bytes = static_cast<size_t>(cache->layout().bytes_per_layer_block());
  for (int l = 0; l < cache->layout().n_layers; ++l) {
    for (int32_t b = 0; b < blocks; ++b) {
      uint8_t* p = cache->LayerBlock(l, b);
      for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(rng());
    }
  }
  return cache;
}

// True when every byte of (layer, block) equals `fill`.
inline bool BlockIs(KvCache& cache, int layer, int32_t block, uint8_t fill) {
  const uint8_t* p = cache.LayerBlock(layer, block);
  for (int64_t i = 0; i < cache.layout().bytes_per_layer_block(); ++i) {
    if (p[i] != fill) return false;
  }
  return true;
}

inline bool SameBlock(KvCache& a, int32_t block_a, KvCache& b, int32_t block_b, int layer) {
  return memcmp(a.LayerBlock(layer, block_a), b.LayerBlock(layer, block_b),
                a.layout().bytes_per_layer_block()) == 0;
}

// Expects every block not in `reserved` to still hold `fill` in every layer.
inline void ExpectGuardBlocksUntouched(KvCache& cache, const std::vector<int32_t>& reserved,
                                       uint8_t fill) {
  for (int32_t b = 0; b < cache.num_ids(); ++b) {
    if (std::find(reserved.begin(), reserved.end(), b) != reserved.end()) continue;
    for (int l = 0; l < cache.layout().n_layers; ++l) {
      EXPECT_TRUE(BlockIs(cache, l, b, fill)) << "guard block " << b << " layer " << l;
    }
  }
}

// Records on_done calls. The callback shares the record, so it stays safe
// to call even if a failed test left the probe's scope first.
class DoneProbe {
 public:
  KvReceiver::DoneCallback Callback() {
    return [state = state_](absl::StatusOr<KvCommit> result) {
      absl::MutexLock lock(&state->mu);
      if (++state->calls == 1) state->called_at = absl::Now();
      state->result = std::move(result);
    };
  }
  // Waits up to `timeout` for the first call; returns its result.
  absl::StatusOr<KvCommit> Wait(absl::Duration timeout = absl::Seconds(10)) {
    absl::MutexLock lock(&state_->mu);
    State* s = state_.get();
    auto called = [s]() { return s->calls > 0; };
    if (!state_->mu.AwaitWithTimeout(absl::Condition(&called), timeout)) {
      return absl::InternalError("test: on_done was not called");
    }
    return state_->result;
  }
  int calls() {
    absl::MutexLock lock(&state_->mu);
    return state_->calls;
  }
  // When the first call came (InfinitePast: none yet).
  absl::Time called_at() {
    absl::MutexLock lock(&state_->mu);
    return state_->called_at;
  }

 private:
  struct State {
    absl::Mutex mu;
    int calls = 0;
    absl::Time called_at = absl::InfinitePast();
    absl::StatusOr<KvCommit> result = absl::UnknownError("not called");
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// A blocking loopback TCP client speaking raw frames.
class RawKvClient {
 public:
  explicit RawKvClient(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_GE(fd_, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~RawKvClient() { close(fd_); }

  // Returns false when the peer has closed (EPIPE / reset).
  bool Write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = send(fd_, p, n, MSG_NOSIGNAL);
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  bool Write(const std::string& s) { return Write(s.data(), s.size()); }
  bool SendHeader(const v1::KvFrameHeader& header) { return Write(EncodeKvMessage(header)); }

  // Reads one ack, or nullopt on timeout / close / garbage.
  std::optional<v1::KvAck> ReadAck(absl::Duration timeout = absl::Seconds(10)) {
    uint8_t prefix[kKvLengthPrefixBytes];
    if (!ReadExactly(prefix, sizeof(prefix), timeout)) return std::nullopt;
    std::string body(DecodeKvLength(prefix), '\0');
    if (body.size() > kMaxKvMessageBytes || !ReadExactly(body.data(), body.size(), timeout)) {
      return std::nullopt;
    }
    v1::KvAck ack;
    if (!ack.ParseFromString(body)) return std::nullopt;
    return ack;
  }

  // True once the peer closed the connection (EOF or reset) within timeout.
  bool WaitClosed(absl::Duration timeout = absl::Seconds(10)) {
    const absl::Time end = absl::Now() + timeout;
    char buf[4096];
    while (absl::Now() < end) {
      pollfd pfd{fd_, POLLIN, 0};
      if (poll(&pfd, 1, 50) <= 0) continue;
      const ssize_t r = recv(fd_, buf, sizeof(buf), 0);
      if (r <= 0) return true;
    }
    return false;
  }

 private:
  bool ReadExactly(void* out, size_t n, absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    char* p = static_cast<char*>(out);
    while (n > 0) {
      const int ms = static_cast<int>(absl::ToInt64Milliseconds(end - absl::Now()));
      pollfd pfd{fd_, POLLIN, 0};
      if (ms <= 0 || poll(&pfd, 1, ms) <= 0) return false;
      const ssize_t r = recv(fd_, p, n, 0);
      if (r <= 0) return false;
      p += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }

  int fd_ = -1;
};

// A loopback socket that listens but never accepts or reads: the kernel
// completes handshakes and buffers a little, then the peer stalls.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    CHECK_EQ(listen(fd_, 4), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { close(fd_); }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// A loopback port with nothing listening on it (connect is refused).
inline uint16_t DeadPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Every layer of block src[i] of `a` equals block dst[i] of `b`.
inline void ExpectBlocksCopied(KvCache& a, const std::vector<int32_t>& src, KvCache& b,
                               const std::vector<int32_t>& dst) {
  for (int l = 0; l < a.layout().n_layers; ++l) {
    for (size_t i = 0; i < src.size(); ++i) {
      EXPECT_TRUE(SameBlock(a, src[i], b, dst[i], l)) << "layer " << l << " block " << i;
    }
  }
}

// Sends every layer of `src_cache`'s blocks `src` as logical blocks 0..n-1,
// then commits with `first_token`; aborts the transfer on any error.
inline absl::Status SendAllLayers(KvSender& sender, const KvTransferTarget& target,
                                  KvCache& src_cache, const std::vector<int32_t>& src,
                                  int32_t first_token) {
  const int layers = src_cache.layout().n_layers;
  std::vector<int32_t> logical(src.size());
  for (size_t i = 0; i < src.size(); ++i) logical[i] = static_cast<int32_t>(i);
  absl::Status st;
  for (int l = 0; l < layers && st.ok(); ++l) {
    st = sender.SendLayer(target, l, logical, src_cache, src);
  }
  if (st.ok()) st = sender.Commit(target, KvCommit{layers, 0, first_token});
  if (!st.ok()) sender.Abort(target, "test");
  return st;
}

// A LAYER_BLOCKS header with a consistent payload size.
inline v1::KvFrameHeader LayerHeader(uint64_t id, uint64_t epoch, uint32_t layer,
                                     const std::vector<uint32_t>& blocks, int64_t block_bytes) {
  v1::KvFrameHeader h;
  h.set_transfer_id(id);
  h.set_epoch(epoch);
  h.set_kind(v1::KvFrameHeader::LAYER_BLOCKS);
  h.set_layer(layer);
  for (uint32_t b : blocks) h.add_block_indices(b);
  h.set_payload_bytes(blocks.size() * static_cast<uint64_t>(block_bytes));
  return h;
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_TESTING_KV_TEST_UTIL_H_
