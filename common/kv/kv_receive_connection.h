// KvReceiveConnection: one accepted TCP connection of the KV receiver. It
// owns the socket and the framing: reads [u32 len][KvFrameHeader], asks the
// receiver (a KvFrameSink) what to do with the frame, then reads the payload
// straight into the block memory the sink names (one buffer per block, no
// intermediate copy) or skips it, and writes the acks the sink hands back.
//
// Every read and write is watched: a peer that stops mid-frame, or stops
// reading acks, for longer than the idle timeout is disconnected. A peer
// idle between frames keeps its connection (connections are reused).
// After a fatal error the connection sends its last ack, shuts down its
// send side, briefly drains what the peer still sends (so the close does not
// reset the ack away) and closes.
//
// Not thread-safe: lives on the receiver's I/O thread.
#ifndef PDSERVE_COMMON_KV_KV_RECEIVE_CONNECTION_H_
#define PDSERVE_COMMON_KV_KV_RECEIVE_CONNECTION_H_

#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/kv/kv_auth.h"
#include "common/kv/kv_frame.h"
#include "common/kv/kv_stream.h"
#include "pdserve/v1/kv_frame.pb.h"

namespace pdserve {

class KvReceiveConnection;

// The receiver's decision about a frame whose header was read.
struct KvFramePlan {
  enum class Action {
    kWrite,  // read the payload into `dst`, then call OnPayloadWritten
    kSkip,   // read and drop the payload
    kClose,  // send `ack` (if any) and close the connection
    kDefer,  // read nothing more until Resume: the sink is still working
             // on the frame off the I/O thread (NCCL receives)
  };
  Action action = Action::kSkip;
  std::vector<boost::asio::mutable_buffer> dst;
  std::optional<v1::KvAck> ack;  // sent before going on
};

// Implemented by the receiver; called on the I/O thread.
class KvFrameSink {
 public:
  virtual ~KvFrameSink() = default;
  virtual KvFramePlan OnHeader(const std::shared_ptr<KvReceiveConnection>& conn,
                               const v1::KvFrameHeader& header) = 0;
  virtual void OnPayloadWritten(const std::shared_ptr<KvReceiveConnection>& conn,
                                const v1::KvFrameHeader& header) = 0;
  // The connection closed while a kWrite payload was partly read.
  virtual void OnPayloadLost(const std::shared_ptr<KvReceiveConnection>& conn,
                             const v1::KvFrameHeader& header, const absl::Status& why) = 0;
  virtual void OnClosed(const std::shared_ptr<KvReceiveConnection>& conn) = 0;
};

class KvReceiveConnection : public std::enable_shared_from_this<KvReceiveConnection> {
 public:
  // An encrypted `stream` first completes its TLS handshake; with `auth`
  // the peer must then pass the KV auth handshake (kv_auth.h) before its
  // first frame is read.
  KvReceiveConnection(KvStream stream, KvFrameSink* sink, absl::Duration idle_timeout,
                      std::shared_ptr<const KvAuthKey> auth = nullptr);

  void Start();
  // Applies the plan of a frame that was kDefer'ed, as if OnHeader had just
  // returned it. No-op once closed.
  void Resume(KvFramePlan plan);
  // Idempotent. Ends any payload read at once: after this returns, nothing
  // more is written into the blocks of the current frame.
  void Close(const absl::Status& why);
  const std::string& peer() const { return peer_; }

 private:
  using Clock = std::chrono::steady_clock;

  void Authenticate();
  void OnHello(const boost::system::error_code& ec);
  void OnProof(const boost::system::error_code& ec);
  void ReadPrefix();
  void OnPrefix(const boost::system::error_code& ec);
  void OnHeaderBytes(const boost::system::error_code& ec);
  void ApplyPlan(KvFramePlan plan);
  void OnPayload(const boost::system::error_code& ec);
  void SkipPayload(uint64_t remaining);
  void SendAck(const v1::KvAck& ack);
  void WriteNextAck();
  void Linger();
  void EnsureWatchdog();
  void OnWatchdog(const boost::system::error_code& ec);
  // Completion condition for reads: marks progress, reads in 64 KiB steps.
  size_t Progress(const boost::system::error_code& ec, size_t bytes);
  void Fail(const boost::system::error_code& ec, const char* what);

  KvStream stream_;
  boost::asio::steady_timer watchdog_;
  KvFrameSink* const sink_;
  const std::shared_ptr<const KvAuthKey> auth_;
  std::string handshake_;  // the auth message being read or written
  KvNonce sender_nonce_{};
  KvNonce receiver_nonce_{};
  const Clock::duration idle_timeout_;
  std::string peer_;

  std::array<uint8_t, kKvLengthPrefixBytes> prefix_{};
  std::string header_bytes_;
  v1::KvFrameHeader header_;
  std::vector<boost::asio::mutable_buffer> payload_dst_;
  std::vector<uint8_t> scratch_;  // skipped payloads land here

  std::deque<std::string> acks_;
  bool closed_ = false;
  bool mid_frame_ = false;        // a frame started and is not fully read
  bool writing_payload_ = false;  // a kWrite payload is being read
  bool writing_ack_ = false;
  bool closing_ = false;  // fatal error: flush acks, then linger
  bool lingering_ = false;
  bool watchdog_armed_ = false;
  absl::Status close_reason_;  // the error the final ack reported
  Clock::time_point last_progress_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_RECEIVE_CONNECTION_H_
