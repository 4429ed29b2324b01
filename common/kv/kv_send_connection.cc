#include "common/kv/kv_send_connection.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

// Bytes per sendmsg for frame writes: large steps mean few syscalls, and
// progress (for the idle timeout) is still seen at least this often.
constexpr size_t kWriteStep = 1 << 20;

}  // namespace

KvSendConnection::KvSendConnection(asio::io_context& io, const HostPort& address,
                                   const KvSendConnectionOptions& options)
    : host_(address.host),
      port_(std::to_string(address.port)),
      endpoint_(FormatHostPort(address.host, address.port)),
      options_(options),
      stream_(io.get_executor(), options.tls),
      resolver_(io),
      watchdog_(io) {}

bool KvSendConnection::TryReserveSlot() {
  if (slots_used_.fetch_add(1) >= options_.max_queued_frames) {
    slots_used_.fetch_sub(1);
    return false;
  }
  return true;
}

bool KvSendConnection::TryReserveSpareSlot() {
  if (slots_used_.fetch_add(1) >= options_.max_queued_frames / 2) {
    slots_used_.fetch_sub(1);
    return false;
  }
  return true;
}

void KvSendConnection::PostEnqueue(KvOutFrame frame) {
  boost::asio::post(stream_.get_executor(),
                    [self = shared_from_this(), frame = std::move(frame)]() mutable {
                      self->Enqueue(std::move(frame));
                    });
}

void KvSendConnection::PostFail(const absl::Status& why) {
  boost::asio::post(stream_.get_executor(), [self = shared_from_this(), why] { self->Fail(why); });
}

void KvSendConnection::Enqueue(KvOutFrame frame) {
  if (dead_.load()) {
    Release(frame, death_);
    return;
  }
  if (frame.transfer != nullptr) {
    if (absl::Status st = frame.transfer->status(); !st.ok() && !frame.on_channel) {
      Release(frame, st);
      return;
    }
    const Key key{frame.transfer->transfer_id(), frame.transfer->epoch()};
    active_.try_emplace(key, frame.transfer);
  }
  queue_.push_back(std::move(frame));
  if (state_ == State::kDisconnected) {
    Connect();
  } else {
    WriteNext();
  }
}

void KvSendConnection::DropTransfer(const std::shared_ptr<KvSendTransfer>& transfer) {
  absl::Status why = transfer->status();
  if (why.ok()) why = absl::CancelledError("kv transfer dropped");
  std::deque<KvOutFrame> keep;
  for (KvOutFrame& f : queue_) {
    if (f.transfer == transfer) {
      Release(f, why);
    } else {
      keep.push_back(std::move(f));
    }
  }
  queue_.swap(keep);
  const Key key{transfer->transfer_id(), transfer->epoch()};
  active_.erase(key);
  awaiting_ack_.erase(key);
  if (inflight_.has_value() && inflight_->transfer == transfer && !inflight_->payload.empty()) {
    Fail(absl::UnavailableError(absl::StrCat("kv connection to ", endpoint_, " reset: transfer ",
                                             transfer->transfer_id(),
                                             " was abandoned in the middle of a frame")));
  }
}

void KvSendConnection::Connect() {
  state_ = State::kConnecting;
  // A fresh generation: completions still queued for the closed socket
  // (e.g. its last ack read) must not fail the new attempt.
  ++generation_;
  last_progress_ = Clock::now();
  EnsureWatchdog();
  resolver_.async_resolve(host_, port_,
                          [self = shared_from_this(), gen = generation_](
                              const error_code& ec, const tcp::resolver::results_type& results) {
                            if (gen != self->generation_) return;
                            if (ec) return self->Fail(self->IoError("resolving", ec));
                            self->stream_.async_connect(
                                results, [self, gen](const error_code& ec, const tcp::endpoint&) {
                                  self->OnConnected(gen, ec);
                                });
                          });
}

void KvSendConnection::OnConnected(uint64_t generation, const error_code& ec) {
  if (generation != generation_) return;
  if (ec) return Fail(IoError("connecting", ec));
  error_code ignored;
  tcp::socket& socket = stream_.socket();
  socket.set_option(tcp::no_delay(true), ignored);
  if (options_.socket_buffer_bytes > 0) {
    socket.set_option(asio::socket_base::send_buffer_size(options_.socket_buffer_bytes), ignored);
  }
  if (!stream_.encrypted()) return OnTlsHandshake(generation, error_code());
  // Still kConnecting: the connect timeout bounds the handshake too.
  stream_.async_handshake(/*client=*/true,
                          [self = shared_from_this(), generation](const error_code& ec) {
                            self->OnTlsHandshake(generation, ec);
                          });
}

void KvSendConnection::OnTlsHandshake(uint64_t generation, const error_code& ec) {
  if (generation != generation_) return;
  if (ec) {
    return Fail(IoError(
        "in the TLS handshake (does the receiver use --kv_tls, with a certificate the CA signed?)",
        ec));
  }
  if (options_.auth != nullptr) return Authenticate(generation);
  Ready();
}

void KvSendConnection::Ready() {
  state_ = State::kConnected;
  last_progress_ = Clock::now();
  if (!options_.attach_head.empty()) {
    // Every connection of a cuda_ipc path starts by attaching our pool.
    slots_used_.fetch_add(1);
    KvOutFrame attach;
    attach.head = options_.attach_head;
    queue_.push_front(std::move(attach));
  }
  ReadAck();
  WriteNext();
}

// Still kConnecting until the receiver has proven the secret, so the
// connect timeout bounds the whole handshake.
void KvSendConnection::Authenticate(uint64_t generation) {
  nonce_ = NewKvNonce();
  handshake_.assign(kKvAuthMagic.data(), kKvAuthMagic.size());
  handshake_.append(reinterpret_cast<const char*>(nonce_.data()), nonce_.size());
  asio::async_write(stream_, asio::buffer(handshake_),
                    [self = shared_from_this(), generation](const error_code& ec, size_t) {
                      if (generation != self->generation_) return;
                      if (ec) return self->Fail(self->IoError("sending the auth hello", ec));
                      self->handshake_.resize(kKvChallengeBytes);
                      asio::async_read(self->stream_, asio::buffer(self->handshake_),
                                       [self, generation](const error_code& ec, size_t) {
                                         self->OnChallenge(generation, ec);
                                       });
                    });
}

void KvSendConnection::OnChallenge(uint64_t generation, const error_code& ec) {
  if (generation != generation_) return;
  if (ec)
    return Fail(
        IoError("reading the auth challenge (does the receiver use --kv_secret_file?)", ec));
  KvNonce receiver{};
  std::copy_n(reinterpret_cast<const uint8_t*>(handshake_.data()), receiver.size(),
              receiver.begin());
  const auto* mac = reinterpret_cast<const uint8_t*>(handshake_.data()) + kKvNonceBytes;
  if (!options_.auth->Verify(KvAuthRole::kReceiver, nonce_, receiver, mac)) {
    return Fail(absl::UnauthenticatedError(absl::StrCat(
        "kv connection to ", endpoint_, ": the receiver failed authentication (wrong KV secret)")));
  }
  const KvMac proof = options_.auth->Prove(KvAuthRole::kSender, nonce_, receiver);
  handshake_.assign(reinterpret_cast<const char*>(proof.data()), proof.size());
  asio::async_write(stream_, asio::buffer(handshake_),
                    [self = shared_from_this(), generation](const error_code& ec, size_t) {
                      if (generation != self->generation_) return;
                      if (ec) return self->Fail(self->IoError("sending the auth proof", ec));
                      self->Ready();
                    });
}

void KvSendConnection::WriteNext() {
  if (state_ != State::kConnected || inflight_.has_value()) return;
  while (!queue_.empty() && !inflight_.has_value()) {
    KvOutFrame f = std::move(queue_.front());
    queue_.pop_front();
    absl::Status st = f.transfer ? f.transfer->status() : absl::OkStatus();
    // A frame whose bytes are already on the channel: its header must go
    // too, even for a failed transfer (the receiver drops it).
    if (st.ok() || f.on_channel) {
      inflight_ = std::move(f);
    } else {
      Release(f, st);  // its transfer failed while the frame waited
    }
  }
  if (!inflight_.has_value()) return;
  write_buffers_.clear();
  write_buffers_.push_back(asio::buffer(inflight_->head));
  write_buffers_.insert(write_buffers_.end(), inflight_->payload.begin(), inflight_->payload.end());
  last_progress_ = Clock::now();
  EnsureWatchdog();
  asio::async_write(
      stream_, write_buffers_,
      [this](const error_code& ec, size_t n) -> size_t {
        if (ec) return 0;
        if (n > 0) last_progress_ = Clock::now();
        return kWriteStep;
      },
      [self = shared_from_this(), gen = generation_](const error_code& ec, size_t) {
        self->OnWritten(gen, ec);
      });
}

void KvSendConnection::OnWritten(uint64_t generation, const error_code& ec) {
  if (generation != generation_) return;
  if (ec) return Fail(IoError("writing a frame", ec));
  KvOutFrame f = std::move(*inflight_);
  inflight_.reset();
  last_progress_ = Clock::now();
  if (f.is_commit && f.transfer != nullptr) {
    awaiting_ack_.insert(Key{f.transfer->transfer_id(), f.transfer->epoch()});
  }
  Release(f, absl::OkStatus());
  WriteNext();
}

void KvSendConnection::ReadAck() {
  asio::async_read(stream_, asio::buffer(ack_prefix_),
                   [self = shared_from_this(), gen = generation_](const error_code& ec, size_t) {
                     self->OnAckPrefix(gen, ec);
                   });
}

void KvSendConnection::OnAckPrefix(uint64_t generation, const error_code& ec) {
  if (generation != generation_) return;
  if (ec) return Fail(IoError("reading an ack", ec));
  const uint32_t length = DecodeKvLength(ack_prefix_.data());
  if (absl::Status st = CheckKvMessageLength(length); !st.ok()) {
    return Fail(absl::UnavailableError(
        absl::StrCat("kv connection to ", endpoint_, ": bad ack: ", st.message())));
  }
  ack_body_.resize(length);
  asio::async_read(stream_, asio::buffer(ack_body_),
                   [self = shared_from_this(), gen = generation_](const error_code& ec, size_t) {
                     self->OnAckBody(gen, ec);
                   });
}

void KvSendConnection::OnAckBody(uint64_t generation, const error_code& ec) {
  if (generation != generation_) return;
  if (ec) return Fail(IoError("reading an ack", ec));
  v1::KvAck ack;
  if (!ack.ParseFromString(ack_body_)) {
    return Fail(absl::UnavailableError(
        absl::StrCat("kv connection to ", endpoint_, ": ack does not parse")));
  }
  HandleAck(ack);
  if (generation == generation_) ReadAck();  // HandleAck may have reset the connection
}

void KvSendConnection::HandleAck(const v1::KvAck& ack) {
  last_progress_ = Clock::now();
  const Key key{ack.transfer_id(), ack.epoch()};
  awaiting_ack_.erase(key);
  const absl::Status status = KvAckToStatus(ack);
  if (auto it = active_.find(key); it == active_.end()) {
    VLOG(1) << "kv connection to " << endpoint_ << ": ack for finished transfer "
            << ack.transfer_id();
  } else if (status.ok()) {
    it->second->Acked();
    active_.erase(it);
  } else {
    // The receiver refused the transfer; nothing more of it is worth sending.
    std::shared_ptr<KvSendTransfer> transfer = std::move(it->second);
    active_.erase(it);
    transfer->Fail(status);
    // nccl: queued headers whose bytes are on the channel still go (see
    // WriteNext), so the ends stay in step; the rest are released there.
    if (!options_.single_use) DropTransfer(transfer);
  }
  if (ack.closing()) {
    // Whatever follows the rejected frame on this connection is lost; stop
    // writing into it now, so that later transfers go to a new connection.
    // A refused ATTACH (transfer 0) keeps its code: it says why the path
    // cannot work (e.g. FAILED_PRECONDITION), which retrying will not fix.
    const bool attach_refused = ack.transfer_id() == 0 && !status.ok();
    const absl::StatusCode code = attach_refused ? status.code() : absl::StatusCode::kUnavailable;
    if (attach_refused && options_.on_attach_refused) options_.on_attach_refused(status);
    Fail(absl::Status(
        code, absl::StrCat("kv connection to ", endpoint_,
                           ": receiver rejected a frame and closed it: ", status.message())));
  }
}

void KvSendConnection::Release(KvOutFrame& frame, const absl::Status& why) {
  slots_used_.fetch_sub(1);
  if (frame.transfer == nullptr) return;
  if (!why.ok()) frame.transfer->Fail(why);
  if (frame.accounted_bytes > 0) frame.transfer->FrameReleased();
}

void KvSendConnection::Fail(const absl::Status& why) {
  // Fire-and-forget frames (ABORT) alone are not worth a warning.
  if (!active_.empty()) {
    LOG(WARNING) << "kv connection to " << endpoint_ << " failed: " << why;
  } else {
    VLOG(1) << "kv connection to " << endpoint_ << " closed: " << why;
  }
  ++generation_;
  state_ = State::kDisconnected;
  if (options_.single_use && !dead_.load()) {
    death_ = absl::Status(
        why.ok() ? absl::StatusCode::kUnavailable : why.code(),
        absl::StrCat("kv connection to ", endpoint_, " (single use) is closed: ", why.message()));
    dead_.store(true);
    if (options_.on_death) options_.on_death();
  }
  stream_.Reset();
  resolver_.cancel();
  watchdog_.cancel();
  watchdog_armed_ = false;
  if (inflight_.has_value()) {
    Release(*inflight_, why);
    inflight_.reset();
  }
  for (KvOutFrame& f : queue_) Release(f, why);
  queue_.clear();
  for (auto& [key, transfer] : active_) transfer->Fail(why);
  active_.clear();
  awaiting_ack_.clear();
}

bool KvSendConnection::Busy() const {
  return state_ == State::kConnecting || inflight_.has_value() || !awaiting_ack_.empty();
}

void KvSendConnection::EnsureWatchdog() {
  if (watchdog_armed_) return;
  watchdog_armed_ = true;
  watchdog_.expires_after(absl::ToChronoNanoseconds(
      state_ == State::kConnecting ? options_.connect_timeout : options_.idle_timeout));
  watchdog_.async_wait([self = shared_from_this(), gen = generation_](const error_code& ec) {
    self->OnWatchdog(gen, ec);
  });
}

void KvSendConnection::OnWatchdog(uint64_t generation, const error_code& ec) {
  if (generation != generation_) return;  // of a socket closed since
  watchdog_armed_ = false;
  if (ec || !Busy()) return;
  const bool connecting = state_ == State::kConnecting;
  const absl::Duration limit = connecting ? options_.connect_timeout : options_.idle_timeout;
  const Clock::time_point due = last_progress_ + absl::ToChronoNanoseconds(limit);
  if (Clock::now() >= due) {
    return Fail(absl::UnavailableError(
        absl::StrCat("kv connection to ", endpoint_,
                     connecting ? ": connect timed out after " : ": no progress for ",
                     absl::FormatDuration(limit))));
  }
  watchdog_armed_ = true;
  watchdog_.expires_at(due);
  watchdog_.async_wait([self = shared_from_this(), gen = generation_](const error_code& ec) {
    self->OnWatchdog(gen, ec);
  });
}

absl::Status KvSendConnection::IoError(const char* what, const error_code& ec) const {
  if (KvStream::IsPeerClose(ec)) {
    return absl::UnavailableError(
        absl::StrCat("kv connection to ", endpoint_, ": receiver closed it while ", what));
  }
  return absl::UnavailableError(
      absl::StrCat("kv connection to ", endpoint_, ": ", what, ": ", ec.message()));
}

}  // namespace pdserve
