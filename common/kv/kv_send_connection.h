// KvSendConnection: the sender's persistent connection to one receiver
// endpoint, reused by every transfer to it and reopened on demand after a
// failure. It owns the socket, a bounded FIFO of frames, and the ack reader.
// Frames go out with one gather write: the encoded header plus one buffer
// per source block, straight from KvCache memory.
//
// A connection failure (connect error, reset, a peer stalled past the
// timeout) fails every transfer that has frames on the connection or awaits
// an ack on it: what the receiver got of them is unknown.
//
// Thread-safety: TryReserveSlot() from any thread; everything else on the
// sender's I/O thread.
#ifndef PDSERVE_COMMON_KV_KV_SEND_CONNECTION_H_
#define PDSERVE_COMMON_KV_KV_SEND_CONNECTION_H_

#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/base/host_port.h"
#include "common/kv/kv_auth.h"
#include "common/kv/kv_frame.h"
#include "common/kv/kv_send_transfer.h"
#include "common/kv/kv_stream.h"

namespace pdserve {

struct KvSendConnectionOptions {
  absl::Duration connect_timeout = absl::Seconds(5);
  // Busy (writing, or awaiting an ack) without progress this long = dead.
  absl::Duration idle_timeout = absl::Seconds(10);
  int max_queued_frames = 1024;
  int socket_buffer_bytes = 0;  // SO_SNDBUF; 0 = kernel autotuning
  // Shared-secret handshake before any frame (kv_auth.h); null = none.
  std::shared_ptr<const KvAuthKey> auth;
  // Mutual TLS on the connection (kv_stream.h); null = plain TCP.
  std::shared_ptr<ReloadingTlsContext> tls;
  // cuda_ipc connections: the encoded ATTACH frame written first on every
  // (re)connection, after the handshake. Empty = none (tcp).
  std::string attach_head;
  // Called (on the I/O thread) when the receiver refuses the ATTACH.
  std::function<void(const absl::Status&)> on_attach_refused;
  // Never reconnect: after the first failure every frame fails at once
  // (nccl connections, whose channel dies with them).
  bool single_use = false;
  // single_use: called once (on the I/O thread) when the connection dies,
  // e.g. so that its channel stops joining a receiver that refused it.
  std::function<void()> on_death;
};

struct KvOutFrame {
  // Null for fire-and-forget frames (ABORT).
  std::shared_ptr<KvSendTransfer> transfer;
  std::string head;                                // length prefix + encoded KvFrameHeader
  std::vector<boost::asio::const_buffer> payload;  // source blocks, not owned
  // Device caches: the host copy `payload` points into, owned by the frame.
  std::shared_ptr<const std::vector<uint8_t>> staged;
  // Layer frames: the KV bytes the frame moves, on the wire or (cuda_ipc)
  // pulled by the receiver. Counted into the commit's total; while > 0 the
  // frame references source memory.
  uint64_t accounted_bytes = 0;
  bool is_commit = false;
  // nccl: the frame's bytes are already on the connection's channel, so its
  // header must be written even if the transfer failed meanwhile (the
  // receiver drops it), or the two ends of the channel fall out of step.
  bool on_channel = false;
};

class KvSendConnection : public std::enable_shared_from_this<KvSendConnection> {
 public:
  KvSendConnection(boost::asio::io_context& io, const HostPort& address,
                   const KvSendConnectionOptions& options);

  const std::string& endpoint() const { return endpoint_; }

  // Any thread: takes a queue slot, or returns false when the queue is
  // full. Every frame handed to Enqueue must hold a slot.
  bool TryReserveSlot();
  // The same, for a frame that only helps (a keep-alive): false from half
  // full on, so it never takes a slot a layer needs.
  bool TryReserveSpareSlot();

  // Queues a frame and connects if needed.
  void Enqueue(KvOutFrame frame);
  // Forgets a transfer: drops its queued frames and stops routing acks to
  // it. A payload frame of it already half on the wire cannot be taken
  // back without desynchronising the stream, so that resets the connection.
  // On return no frame of the transfer references source memory.
  void DropTransfer(const std::shared_ptr<KvSendTransfer>& transfer);
  // A single_use connection that failed, and why; any thread.
  bool dead() const { return dead_.load(); }
  absl::Status death() const { return dead_.load() ? death_ : absl::OkStatus(); }
  // Fails everything and closes; the object may be reused afterwards.
  void Fail(const absl::Status& why);

  // Any thread: Enqueue / Fail on the I/O thread (the connection is kept
  // alive until then).
  void PostEnqueue(KvOutFrame frame);
  void PostFail(const absl::Status& why);

 private:
  using Clock = std::chrono::steady_clock;
  using Key = std::pair<uint64_t, uint64_t>;  // transfer_id, epoch

  void Connect();
  void OnConnected(uint64_t generation, const boost::system::error_code& ec);
  void OnTlsHandshake(uint64_t generation, const boost::system::error_code& ec);
  // The KV auth handshake (kv_auth.h), run before the connection counts
  // as connected when a key is configured.
  void Authenticate(uint64_t generation);
  void OnChallenge(uint64_t generation, const boost::system::error_code& ec);
  void Ready();
  void WriteNext();
  void OnWritten(uint64_t generation, const boost::system::error_code& ec);
  void ReadAck();
  void OnAckPrefix(uint64_t generation, const boost::system::error_code& ec);
  void OnAckBody(uint64_t generation, const boost::system::error_code& ec);
  void HandleAck(const v1::KvAck& ack);
  void Release(KvOutFrame& frame, const absl::Status& why);
  void EnsureWatchdog();
  void OnWatchdog(uint64_t generation, const boost::system::error_code& ec);
  bool Busy() const;
  absl::Status IoError(const char* what, const boost::system::error_code& ec) const;

  const std::string host_;
  const std::string port_;
  const std::string endpoint_;
  const KvSendConnectionOptions options_;
  KvStream stream_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::steady_timer watchdog_;
  std::atomic<int> slots_used_{0};
  std::atomic<bool> dead_{false};
  absl::Status death_;  // written once, before dead_ is set

  enum class State { kDisconnected, kConnecting, kConnected };
  State state_ = State::kDisconnected;
  // Bumped on every (re)connect and failure; handlers of an older socket
  // see a different value and do nothing.
  uint64_t generation_ = 0;
  std::deque<KvOutFrame> queue_;
  std::optional<KvOutFrame> inflight_;
  std::vector<boost::asio::const_buffer> write_buffers_;
  absl::flat_hash_map<Key, std::shared_ptr<KvSendTransfer>> active_;
  absl::flat_hash_set<Key> awaiting_ack_;  // commits written, not yet acked
  std::array<uint8_t, kKvLengthPrefixBytes> ack_prefix_{};
  std::string ack_body_;
  std::string handshake_;  // the auth message being written or read
  KvNonce nonce_{};        // this connection attempt's sender nonce
  bool watchdog_armed_ = false;
  Clock::time_point last_progress_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_SEND_CONNECTION_H_
