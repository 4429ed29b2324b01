#include "common/kv/kv_receive_connection.h"

#include <algorithm>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "absl/strings/str_cat.h"
#include "common/base/host_port.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

// Payload reads go to the kernel in steps this large; bigger steps cost
// fewer syscalls, and progress is still noticed at least this often.
constexpr size_t kReadStep = 1 << 20;
constexpr size_t kScratchBytes = 64 * 1024;
// After a fatal error, how long the peer's remaining bytes are drained so
// that closing does not send a reset ahead of the final ack.
constexpr auto kMaxLinger = std::chrono::seconds(1);

std::string PeerName(const asio::ip::tcp::socket& socket) {
  error_code ec;
  const auto ep = socket.remote_endpoint(ec);
  if (ec) return "unknown peer";
  return FormatHostPort(ep.address().to_string(), ep.port());
}

}  // namespace

KvReceiveConnection::KvReceiveConnection(KvStream stream, KvFrameSink* sink,
                                         absl::Duration idle_timeout,
                                         std::shared_ptr<const KvAuthKey> auth)
    : stream_(std::move(stream)),
      watchdog_(stream_.get_executor()),
      sink_(sink),
      auth_(std::move(auth)),
      idle_timeout_(absl::ToChronoNanoseconds(idle_timeout)),
      peer_(PeerName(stream_.socket())) {}

void KvReceiveConnection::Start() {
  last_progress_ = Clock::now();
  if (!stream_.encrypted()) return Authenticate();
  // Handshakes are watched like a frame: a peer that stalls in one is cut.
  mid_frame_ = true;
  EnsureWatchdog();
  stream_.async_handshake(/*client=*/false, [self = shared_from_this()](const error_code& ec) {
    if (self->closed_) return;
    if (ec) {
      return self->Close(absl::UnauthenticatedError(
          absl::StrCat("kv connection from ", self->peer_, ": TLS handshake failed (", ec.message(),
                       "; is --kv_tls set on the sender, with a certificate the CA signed?)")));
    }
    self->last_progress_ = Clock::now();
    self->Authenticate();
  });
}

void KvReceiveConnection::Authenticate() {
  if (auth_ == nullptr) return ReadPrefix();
  mid_frame_ = true;
  EnsureWatchdog();
  handshake_.resize(kKvHelloBytes);
  asio::async_read(
      stream_, asio::buffer(handshake_),
      [this](const error_code& ec, size_t n) { return Progress(ec, n); },
      [self = shared_from_this()](const error_code& ec, size_t) { self->OnHello(ec); });
}

void KvReceiveConnection::OnHello(const error_code& ec) {
  if (closed_) return;
  if (ec) return Fail(ec, "reading the auth hello");
  if (absl::string_view(handshake_).substr(0, kKvAuthMagic.size()) != kKvAuthMagic) {
    return Close(absl::UnauthenticatedError(absl::StrCat(
        "kv connection from ", peer_,
        " sent frames without authenticating (is --kv_secret_file set on the prefill worker?)")));
  }
  std::copy_n(reinterpret_cast<const uint8_t*>(handshake_.data()) + kKvAuthMagic.size(),
              sender_nonce_.size(), sender_nonce_.begin());
  receiver_nonce_ = NewKvNonce();
  const KvMac mac = auth_->Prove(KvAuthRole::kReceiver, sender_nonce_, receiver_nonce_);
  handshake_.assign(reinterpret_cast<const char*>(receiver_nonce_.data()), receiver_nonce_.size());
  handshake_.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  asio::async_write(stream_, asio::buffer(handshake_),
                    [self = shared_from_this()](const error_code& ec, size_t) {
                      if (self->closed_) return;
                      if (ec) return self->Fail(ec, "writing the auth challenge");
                      self->last_progress_ = Clock::now();
                      self->handshake_.resize(kKvMacBytes);
                      asio::async_read(
                          self->stream_, asio::buffer(self->handshake_),
                          [raw = self.get()](const error_code& ec, size_t n) {
                            return raw->Progress(ec, n);
                          },
                          [self](const error_code& ec, size_t) { self->OnProof(ec); });
                    });
}

void KvReceiveConnection::OnProof(const error_code& ec) {
  if (closed_) return;
  if (ec) return Fail(ec, "reading the auth proof");
  if (!auth_->Verify(KvAuthRole::kSender, sender_nonce_, receiver_nonce_,
                     reinterpret_cast<const uint8_t*>(handshake_.data()))) {
    return Close(absl::UnauthenticatedError(
        absl::StrCat("kv connection from ", peer_, " failed authentication (wrong KV secret)")));
  }
  VLOG(1) << "kv connection from " << peer_ << " authenticated";
  handshake_.clear();
  ReadPrefix();
}

size_t KvReceiveConnection::Progress(const error_code& ec, size_t bytes) {
  if (ec) return 0;
  if (bytes > 0) {
    // The first byte of a frame starts the idle clock; between frames a
    // connection may rest for as long as it likes.
    mid_frame_ = true;
    last_progress_ = Clock::now();
    EnsureWatchdog();
  }
  return kReadStep;
}

void KvReceiveConnection::ReadPrefix() {
  mid_frame_ = false;
  asio::async_read(
      stream_, asio::buffer(prefix_),
      [this](const error_code& ec, size_t n) { return Progress(ec, n); },
      [self = shared_from_this()](const error_code& ec, size_t) { self->OnPrefix(ec); });
}

void KvReceiveConnection::OnPrefix(const error_code& ec) {
  if (closed_) return;
  if (KvStream::IsPeerClose(ec) && !mid_frame_) {
    Close(absl::OkStatus());
    return;
  }
  if (ec) return Fail(ec, "reading frame length");
  mid_frame_ = true;
  last_progress_ = Clock::now();
  EnsureWatchdog();
  const uint32_t length = DecodeKvLength(prefix_.data());
  if (absl::Status st = CheckKvMessageLength(length); !st.ok()) {
    Close(st);
    return;
  }
  header_bytes_.resize(length);
  asio::async_read(
      stream_, asio::buffer(header_bytes_),
      [this](const error_code& ec, size_t n) { return Progress(ec, n); },
      [self = shared_from_this()](const error_code& ec, size_t) { self->OnHeaderBytes(ec); });
}

void KvReceiveConnection::OnHeaderBytes(const error_code& ec) {
  if (closed_) return;
  if (ec) return Fail(ec, "reading frame header");
  last_progress_ = Clock::now();
  if (!header_.ParseFromString(header_bytes_)) {
    Close(absl::InvalidArgumentError("kv frame: header does not parse"));
    return;
  }
  ApplyPlan(sink_->OnHeader(shared_from_this(), header_));
}

void KvReceiveConnection::ApplyPlan(KvFramePlan plan) {
  if (closed_) return;
  if (plan.ack.has_value()) SendAck(*plan.ack);
  switch (plan.action) {
    case KvFramePlan::Action::kClose:
      closing_ = true;
      if (!writing_ack_) Linger();
      return;
    case KvFramePlan::Action::kSkip:
      SkipPayload(KvWirePayloadBytes(header_));
      return;
    case KvFramePlan::Action::kDefer:
      // No bytes are owed by the peer meanwhile: the idle clock stops.
      mid_frame_ = false;
      return;
    case KvFramePlan::Action::kWrite:
      payload_dst_ = std::move(plan.dst);
      writing_payload_ = true;
      asio::async_read(
          stream_, payload_dst_, [this](const error_code& ec, size_t n) { return Progress(ec, n); },
          [self = shared_from_this()](const error_code& ec, size_t) { self->OnPayload(ec); });
      return;
  }
}

void KvReceiveConnection::Resume(KvFramePlan plan) {
  if (closed_) return;
  last_progress_ = Clock::now();
  ApplyPlan(std::move(plan));
}

void KvReceiveConnection::OnPayload(const error_code& ec) {
  if (closed_) return;
  if (ec) return Fail(ec, "reading frame payload");
  writing_payload_ = false;
  payload_dst_.clear();
  sink_->OnPayloadWritten(shared_from_this(), header_);
  if (!closed_) ReadPrefix();
}

void KvReceiveConnection::SkipPayload(uint64_t remaining) {
  if (remaining == 0) {
    ReadPrefix();
    return;
  }
  scratch_.resize(kScratchBytes);
  const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining, scratch_.size()));
  asio::async_read(
      stream_, asio::buffer(scratch_.data(), n),
      [this](const error_code& ec, size_t got) { return Progress(ec, got); },
      [self = shared_from_this(), remaining, n](const error_code& ec, size_t) {
        if (self->closed_) return;
        if (ec) return self->Fail(ec, "skipping frame payload");
        self->last_progress_ = Clock::now();
        self->SkipPayload(remaining - n);
      });
}

void KvReceiveConnection::SendAck(const v1::KvAck& ack) {
  if (!ack.ok()) {
    close_reason_ = absl::Status(static_cast<absl::StatusCode>(ack.status_code()), ack.error());
  }
  acks_.push_back(EncodeKvMessage(ack));
  if (!writing_ack_) WriteNextAck();
}

void KvReceiveConnection::WriteNextAck() {
  if (acks_.empty()) {
    if (closing_) Linger();
    return;
  }
  writing_ack_ = true;
  last_progress_ = Clock::now();
  EnsureWatchdog();
  asio::async_write(stream_, asio::buffer(acks_.front()),
                    [self = shared_from_this()](const error_code& ec, size_t) {
                      if (self->closed_) return;
                      if (ec) return self->Fail(ec, "writing ack");
                      self->writing_ack_ = false;
                      self->acks_.pop_front();
                      self->last_progress_ = Clock::now();
                      self->WriteNextAck();
                    });
}

void KvReceiveConnection::Linger() {
  if (closed_) return;
  if (!lingering_) {
    lingering_ = true;
    error_code ignored;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
    last_progress_ = Clock::now();  // the linger clock; drained bytes don't extend it
    EnsureWatchdog();
  }
  scratch_.resize(kScratchBytes);
  stream_.async_read_some(asio::buffer(scratch_),
                          [self = shared_from_this()](const error_code& ec, size_t) {
                            if (self->closed_) return;
                            if (ec) return self->Close(self->close_reason_);
                            self->Linger();
                          });
}

void KvReceiveConnection::EnsureWatchdog() {
  if (watchdog_armed_ || closed_) return;
  watchdog_armed_ = true;
  watchdog_.expires_after(idle_timeout_);
  watchdog_.async_wait([self = shared_from_this()](const error_code& ec) { self->OnWatchdog(ec); });
}

void KvReceiveConnection::OnWatchdog(const error_code& ec) {
  watchdog_armed_ = false;
  if (closed_ || ec == asio::error::operation_aborted) return;
  if (!mid_frame_ && !writing_ack_ && !lingering_) return;  // re-armed by the next frame
  const Clock::duration limit =
      lingering_ ? std::min<Clock::duration>(idle_timeout_, kMaxLinger) : idle_timeout_;
  const Clock::time_point due = last_progress_ + limit;
  if (Clock::now() >= due) {
    if (lingering_) return Close(close_reason_);
    return Close(
        absl::DeadlineExceededError(absl::StrCat("kv connection from ", peer_, ": no progress for ",
                                                 absl::FormatDuration(absl::FromChrono(limit)),
                                                 writing_ack_ ? " writing an ack" : " mid-frame")));
  }
  watchdog_armed_ = true;
  watchdog_.expires_at(due);
  watchdog_.async_wait([self = shared_from_this()](const error_code& ec) { self->OnWatchdog(ec); });
}

void KvReceiveConnection::Fail(const error_code& ec, const char* what) {
  const bool clean_eof = KvStream::IsPeerClose(ec);
  Close(absl::UnavailableError(absl::StrCat("kv connection from ", peer_, ": ",
                                            clean_eof ? "peer closed the connection" : ec.message(),
                                            " while ", what)));
}

void KvReceiveConnection::Close(const absl::Status& why) {
  if (closed_) return;
  closed_ = true;
  if (why.ok()) {
    VLOG(1) << "kv connection from " << peer_ << " closed";
  } else {
    LOG(WARNING) << "closing kv connection from " << peer_ << ": " << why;
  }
  error_code ignored;
  stream_.socket().close(ignored);
  watchdog_.cancel();
  auto self = shared_from_this();
  if (writing_payload_) {
    writing_payload_ = false;
    sink_->OnPayloadLost(self, header_,
                         why.ok() ? absl::UnavailableError("connection closed") : why);
  }
  sink_->OnClosed(self);
}

}  // namespace pdserve
