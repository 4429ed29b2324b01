#include "common/kv/framed_kv_receiver.h"

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>

#include "absl/strings/str_cat.h"
#include "common/base/host_port.h"
#include "common/base/status_macros.h"
#include "common/kv/framed_kv_receiver_impl.h"
#include "common/kv/kv_frame.h"
#include "glog/logging.h"

namespace pdserve {
namespace kv_receiver_internal {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

namespace {
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);
}  // namespace

FramedKvReceiverImpl::~FramedKvReceiverImpl() {
  io_.RunSync([this] {
    stopping_ = true;
    error_code ignored;
    acceptor_.close(ignored);
    accept_retry_.cancel();
    std::vector<uint64_t> ids;
    for (const auto& [id, p] : pending_) ids.push_back(id);
    for (uint64_t id : ids) Finish(id, absl::CancelledError("kv receiver shutting down"));
    const std::vector<ConnPtr> conns(connections_.begin(), connections_.end());
    for (const ConnPtr& c : conns) c->Close(absl::OkStatus());
    // Channel threads post to io_: all of them end before it does.
    nccl_peers_.Shutdown();
    // Every channel has stopped, so nothing writes into the blocks of the
    // reservations that waited for one; their settling, posted, would come
    // too late.
    std::vector<std::unique_ptr<Pending>> ending = std::move(ending_);
    ending_.clear();
    for (std::unique_ptr<Pending>& p : ending) Complete(std::move(p));
  });
  io_.Stop();
}

absl::Status FramedKvReceiverImpl::Listen() {
  ASSIGN_OR_RETURN(HostPort hp, ParseHostPort(options_.listen_address));
  error_code ec;
  const asio::ip::address address = hp.host.empty() ? asio::ip::address(asio::ip::address_v4::any())
                                                    : asio::ip::make_address(hp.host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv receiver: bad listen address ", options_.listen_address));
  }
  const tcp::endpoint endpoint(address, hp.port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  // Set on the listener so that accepted sockets start with it (a receive
  // window above 64 KiB must be in place before the handshake).
  if (!ec && options_.socket_buffer_bytes > 0) {
    acceptor_.set_option(asio::socket_base::receive_buffer_size(options_.socket_buffer_bytes), ec);
  }
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("kv receiver: cannot listen on ",
                                               options_.listen_address, ": ", ec.message()));
  }
  port_ = acceptor_.local_endpoint(ec).port();
  asio::post(io_.context(), [this] { Accept(); });
  LOG(INFO) << "kv receiver listening on " << FormatHostPort(address.to_string(), port_);
  return absl::OkStatus();
}

void FramedKvReceiverImpl::Accept() {
  acceptor_.async_accept([this](const error_code& ec, tcp::socket socket) {
    if (stopping_) return;
    if (ec) {
      // E.g. out of file descriptors: keep serving, but don't spin.
      LOG(WARNING) << "kv receiver: accept failed: " << ec.message();
      accept_retry_.expires_after(kAcceptRetryDelay);
      accept_retry_.async_wait([this](const error_code& e) {
        if (!e && !stopping_) Accept();
      });
      return;
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    auto conn = std::make_shared<KvReceiveConnection>(std::move(socket), this,
                                                      options_.idle_timeout, options_.auth);
    connections_.insert(conn);
    conn->Start();
    Accept();
  });
}

absl::Status FramedKvReceiverImpl::Expect(uint64_t transfer_id, uint64_t epoch,
                                       std::vector<int32_t> dst_block_ids, int num_layers,
                                       absl::Time deadline, DoneCallback on_done) {
  RETURN_IF_ERROR(
      KvReservation::Validate(dst_block_ids, num_layers, cache_->layout(), cache_->num_blocks()));
  if (!on_done) return absl::InvalidArgumentError("kv reservation: no on_done callback");
  if (deadline <= absl::Now()) {
    return absl::DeadlineExceededError(
        absl::StrCat("kv reservation ", transfer_id, ": deadline already passed"));
  }
  auto reservation = std::make_unique<KvReservation>(transfer_id, epoch, std::move(dst_block_ids),
                                                     num_layers, bytes_per_layer_block_);
  absl::Status status;
  io_.RunSync([&] { status = Install(std::move(reservation), deadline, std::move(on_done)); });
  return status;
}

absl::Status FramedKvReceiverImpl::Install(std::unique_ptr<KvReservation> reservation,
                                        absl::Time deadline, DoneCallback on_done) {
  const uint64_t id = reservation->transfer_id();
  const uint64_t epoch = reservation->epoch();
  if (stopping_) return absl::UnavailableError("kv receiver is shutting down");
  if (auto it = pending_.find(id); it != pending_.end()) {
    const uint64_t current = it->second->reservation->epoch();
    if (current >= epoch) {
      return absl::FailedPreconditionError(absl::StrCat(
          "kv reservation ", id, ": epoch ", epoch, " is not newer than pending epoch ", current));
    }
    Finish(id, absl::AbortedError(absl::StrCat("kv transfer ", id, " epoch ", current,
                                               " superseded by epoch ", epoch)));
  }
  // The old epochs' channel receives are stopped in the background; the new
  // epoch's frames wait for that (Fenced), not this (the engine's) thread.
  InterruptEnding(id);
  auto p = std::make_unique<Pending>(io_.context());
  p->reservation = std::move(reservation);
  p->on_done = std::move(on_done);
  p->window = deadline - absl::Now();
  ArmDeadline(p.get(), deadline);
  // An on_done run above (a superseded epoch) that re-armed this id itself
  // would leave two reservations for one id.
  const bool inserted = pending_.emplace(id, std::move(p)).second;
  CHECK(inserted) << "kv reservation " << id << " installed twice";
  num_pending_.fetch_add(1);
  return absl::OkStatus();
}

void FramedKvReceiverImpl::ArmDeadline(Pending* p, absl::Time at) {
  const uint64_t id = p->reservation->transfer_id();
  const uint64_t epoch = p->reservation->epoch();
  p->expires = at;
  // Re-arming cancels the previous wait, whose handler then sees an error.
  p->deadline_timer.expires_after(absl::ToChronoNanoseconds(at - absl::Now()));
  p->deadline_timer.async_wait([this, id, epoch](const error_code& ec) {
    if (!ec) OnDeadline(id, epoch);
  });
}

void FramedKvReceiverImpl::OnDeadline(uint64_t transfer_id, uint64_t epoch) {
  auto it = pending_.find(transfer_id);
  if (it == pending_.end() || it->second->reservation->epoch() != epoch) return;
  // A handler already queued when a frame moved the deadline (re-arming
  // cannot cancel it), or a timer that fired a hair early: wait again.
  if (absl::Now() < it->second->expires) {
    ArmDeadline(it->second.get(), it->second->expires);
    return;
  }
  Finish(transfer_id,
         absl::DeadlineExceededError(absl::StrCat(
             "kv transfer ", transfer_id, " epoch ", epoch, ": no KV frame for ",
             absl::FormatDuration(absl::Ceil(it->second->window, absl::Milliseconds(1))), ", ",
             it->second->reservation->written_bytes(), " bytes received")));
  // The peer has been silent for the whole wait: a receive still in
  // progress will not complete either.
  InterruptEnding(transfer_id);
}

void FramedKvReceiverImpl::Cancel(uint64_t transfer_id) {
  io_.RunSync([&] {
    if (!pending_.contains(transfer_id)) return;
    Finish(transfer_id, absl::CancelledError(
                            absl::StrCat("kv transfer ", transfer_id, " cancelled by receiver")));
  });
}

void FramedKvReceiverImpl::Finish(uint64_t transfer_id, absl::StatusOr<KvCommit> result) {
  auto it = pending_.find(transfer_id);
  CHECK(it != pending_.end());
  std::unique_ptr<Pending> p = std::move(it->second);
  pending_.erase(it);
  p->deadline_timer.cancel();
  const absl::Status why = result.ok() ? absl::OkStatus() : result.status();
  if (!result.ok()) VLOG(1) << "kv transfer " << transfer_id << " failed: " << why;
  p->result = std::move(result);
  const absl::Status ended =
      absl::AbortedError(absl::StrCat("kv transfer ", transfer_id, " ended: ", why.message()));
  // Closing a socket on this thread ends its pending read: no TCP payload
  // byte lands in these blocks after this.
  for (const ConnPtr& c : p->writers) c->Close(ended);
  ReleaseFenced(p.get());  // no longer current: their bytes are drained or skipped
  // An older epoch of the transfer may still write into the same blocks:
  // they are not the caller's before it stops either.
  if (p->channel_writers.empty() && !Fenced(transfer_id)) {
    Complete(std::move(p));
    return;
  }
  // An NCCL receive into the blocks is in progress. Waiting here for it to
  // end would block the caller (Cancel and Expect come from the engine
  // thread): the reservation waits in ending_ instead, and completes once
  // its channels, and the older epochs', settle. The receive is left to
  // complete (bounded by the frame timeout), which keeps the channel in step
  // for the connection's other transfers; InterruptEnding cuts it short.
  ending_.push_back(std::move(p));
}

void FramedKvReceiverImpl::Complete(std::unique_ptr<Pending> p) {
  num_pending_.fetch_sub(1);
  p->on_done(std::move(p->result));
}

Pending* FramedKvReceiverImpl::EndingFedBy(const ConnPtr& conn) {
  for (const std::unique_ptr<Pending>& p : ending_) {
    if (p->channel_writers.contains(conn)) return p.get();
  }
  return nullptr;
}

void FramedKvReceiverImpl::SettleChannel(const ConnPtr& conn) {
  Pending* p = EndingFedBy(conn);
  if (p == nullptr) return;
  p->channel_writers.erase(conn);
  CompleteSettled(p->reservation->transfer_id());
}

void FramedKvReceiverImpl::CompleteSettled(uint64_t transfer_id) {
  while (true) {
    // The oldest ended epoch of the transfer: the newer ones wait for it.
    auto oldest = ending_.end();
    for (auto it = ending_.begin(); it != ending_.end(); ++it) {
      if ((*it)->reservation->transfer_id() == transfer_id &&
          (oldest == ending_.end() ||
           (*it)->reservation->epoch() < (*oldest)->reservation->epoch())) {
        oldest = it;
      }
    }
    if (oldest == ending_.end()) break;
    if (!(*oldest)->channel_writers.empty()) return;
    std::unique_ptr<Pending> done = std::move(*oldest);
    ending_.erase(oldest);
    Complete(std::move(done));
  }
  // Nothing of an ended epoch writes into the blocks any more.
  if (auto next = pending_.find(transfer_id); next != pending_.end()) {
    ReleaseFenced(next->second.get());
  }
}

void FramedKvReceiverImpl::InterruptEnding(uint64_t transfer_id) {
  std::vector<ConnPtr> conns;
  for (const std::unique_ptr<Pending>& p : ending_) {
    if (p->reservation->transfer_id() != transfer_id) continue;
    conns.insert(conns.end(), p->channel_writers.begin(), p->channel_writers.end());
  }
  const absl::Status why =
      absl::AbortedError(absl::StrCat("kv transfer ", transfer_id, " has a newer epoch"));
  for (const ConnPtr& c : conns) c->Close(why);  // OnClosed stops the channel
}

bool FramedKvReceiverImpl::Fenced(uint64_t transfer_id) const {
  return std::any_of(ending_.begin(), ending_.end(), [transfer_id](const auto& p) {
    return p->reservation->transfer_id() == transfer_id;
  });
}

void FramedKvReceiverImpl::ReleaseFenced(Pending* p) {
  std::vector<std::pair<ConnPtr, v1::KvFrameHeader>> fenced = std::move(p->fenced);
  p->fenced.clear();
  for (const auto& [conn, header] : fenced) conn->Resume(PlanLayer(conn, header));
}

Match FramedKvReceiverImpl::Lookup(const v1::KvFrameHeader& header, Pending** pending) {
  auto it = pending_.find(header.transfer_id());
  if (it == pending_.end()) return Match::kUnknown;
  *pending = it->second.get();
  const uint64_t epoch = it->second->reservation->epoch();
  if (header.epoch() < epoch) return Match::kStale;
  if (header.epoch() > epoch) return Match::kFuture;
  return Match::kCurrent;
}

KvFramePlan FramedKvReceiverImpl::OnHeader(const ConnPtr& conn, const v1::KvFrameHeader& header) {
  const absl::Status shape =
      CheckKvFrameShape(header, bytes_per_layer_block_, cache_->num_blocks());
  if (!shape.ok()) return Reject(header, shape);
  switch (header.kind()) {
    case v1::KvFrameHeader::LAYER_BLOCKS:
      return PlanLayer(conn, header);
    case v1::KvFrameHeader::COMMIT:
      return PlanCommit(header);
    case v1::KvFrameHeader::PROGRESS:
      return PlanProgress(header);
    case v1::KvFrameHeader::ATTACH:
    case v1::KvFrameHeader::NCCL_HELLO:
      return PlanAttach(conn, header);
    default:
      return PlanAbort(header);
  }
}

KvFramePlan DeferPlan() {
  KvFramePlan plan;
  plan.action = KvFramePlan::Action::kDefer;
  return plan;
}

KvFramePlan CloseWith(uint64_t transfer_id, uint64_t epoch, const absl::Status& status) {
  KvFramePlan plan;
  plan.action = KvFramePlan::Action::kClose;
  plan.ack = MakeKvAck(transfer_id, epoch, status);
  plan.ack->set_closing(true);
  return plan;
}

KvFramePlan FramedKvReceiverImpl::Reject(const v1::KvFrameHeader& header, const absl::Status& status) {
  Pending* p = nullptr;
  if (Lookup(header, &p) == Match::kCurrent) Finish(header.transfer_id(), status);
  return CloseWith(header.transfer_id(), header.epoch(), status);
}

// Answers a frame that names no current reservation. Stale-epoch layer
// frames are dropped quietly: their sender was replaced on purpose.
KvFramePlan SkipNonCurrent(const v1::KvFrameHeader& header, Match match) {
  KvFramePlan plan;
  plan.action = KvFramePlan::Action::kSkip;
  const std::string what =
      absl::StrCat("kv transfer ", header.transfer_id(), " epoch ", header.epoch());
  if (match == Match::kUnknown) {
    LOG_EVERY_N(WARNING, 100) << what << ": unknown transfer, frame dropped";
    plan.ack = MakeKvAck(header.transfer_id(), header.epoch(),
                         absl::NotFoundError(absl::StrCat(what, ": no such transfer pending")));
  } else if (match == Match::kFuture) {
    LOG_EVERY_N(WARNING, 100) << what << ": epoch from the future, frame dropped";
    plan.ack = MakeKvAck(header.transfer_id(), header.epoch(),
                         absl::FailedPreconditionError(absl::StrCat(what, ": epoch not reserved")));
  } else {
    LOG_EVERY_N(INFO, 100) << what << ": stale epoch, frame dropped";
    if (header.kind() == v1::KvFrameHeader::COMMIT) {
      plan.ack = MakeKvAck(header.transfer_id(), header.epoch(),
                           absl::FailedPreconditionError(absl::StrCat(what, ": stale epoch")));
    }
  }
  return plan;
}

KvFramePlan FramedKvReceiverImpl::PlanLayer(const ConnPtr& conn, const v1::KvFrameHeader& header) {
  Pending* p = nullptr;
  const Match match = Lookup(header, &p);
  if (match != Match::kCurrent) {
    if (header.payload_path() == v1::KvFrameHeader::PAYLOAD_NCCL) {
      return DrainLayer(conn, header, match);
    }
    return SkipNonCurrent(header, match);
  }
  if (Fenced(header.transfer_id())) {
    p->fenced.emplace_back(conn, header);
    NoteProgress(p);
    return DeferPlan();
  }
  if (absl::Status st = p->reservation->ClaimLayerBlocks(header); !st.ok()) {
    return Reject(header, st);
  }
  NoteProgress(p);
  if (header.payload_path() != v1::KvFrameHeader::PAYLOAD_INLINE) {
    return PullLayer(conn, header, p);
  }
  KvFramePlan plan;
  plan.action = KvFramePlan::Action::kWrite;
  plan.dst.reserve(header.block_indices_size());
  const size_t block_bytes = static_cast<size_t>(bytes_per_layer_block_);
  Pending::Staging* staging = nullptr;
  if (cache_->on_device()) {
    staging = &p->staging[conn];
    staging->bytes.resize(header.block_indices_size() * block_bytes);
    staging->blocks.clear();
  }
  for (int i = 0; i < header.block_indices_size(); ++i) {
    uint8_t* block =
        cache_->LayerBlock(header.layer(), p->reservation->dst_block(header.block_indices(i)));
    if (staging == nullptr) {
      plan.dst.emplace_back(block, block_bytes);
    } else {
      staging->blocks.push_back(block);
      plan.dst.emplace_back(staging->bytes.data() + i * block_bytes, block_bytes);
    }
  }
  p->writers.insert(conn);
  return plan;
}

void FramedKvReceiverImpl::NoteProgress(Pending* p) {
  // A long prompt streams its layers chunk by chunk: the wait runs from the
  // last sign of progress, not from the reservation. (Not on every frame:
  // re-arming a timer is a syscall's worth of work.)
  if (const absl::Time now = absl::Now(); now + p->window - p->expires > p->window / 32) {
    ArmDeadline(p, now + p->window);
  }
}

KvFramePlan FramedKvReceiverImpl::PlanProgress(const v1::KvFrameHeader& header) {
  Pending* p = nullptr;
  // Another epoch's, or a transfer that ended: nothing to wait for.
  if (Lookup(header, &p) == Match::kCurrent) NoteProgress(p);
  return KvFramePlan{};
}

KvFramePlan FramedKvReceiverImpl::PlanCommit(const v1::KvFrameHeader& header) {
  Pending* p = nullptr;
  const Match match = Lookup(header, &p);
  if (match != Match::kCurrent) return SkipNonCurrent(header, match);
  absl::StatusOr<KvCommit> commit = p->reservation->CheckCommit(header);
  KvFramePlan plan;
  plan.action = KvFramePlan::Action::kSkip;
  plan.ack = MakeKvAck(header.transfer_id(), header.epoch(), commit.status());
  Finish(header.transfer_id(), std::move(commit));
  return plan;
}

KvFramePlan FramedKvReceiverImpl::PlanAbort(const v1::KvFrameHeader& header) {
  Pending* p = nullptr;
  if (Lookup(header, &p) == Match::kCurrent) {
    Finish(header.transfer_id(),
           absl::AbortedError(absl::StrCat("kv sender aborted transfer ", header.transfer_id(),
                                           ": ", header.error())));
  }
  return KvFramePlan{};
}

void FramedKvReceiverImpl::OnPayloadWritten(const ConnPtr& conn, const v1::KvFrameHeader& header) {
  Pending* p = nullptr;
  if (Lookup(header, &p) != Match::kCurrent || !p->writers.erase(conn)) return;
  if (absl::Status st = Unstage(p, conn); !st.ok()) {
    LOG(ERROR) << "kv transfer " << header.transfer_id() << ": device copy failed: " << st;
    Finish(header.transfer_id(),
           absl::DataLossError(absl::StrCat("kv transfer ", header.transfer_id(),
                                            ": device copy failed: ", st.message())));
    return;
  }
  p->reservation->AddWrittenBytes(header.payload_bytes());
}

void FramedKvReceiverImpl::OnPayloadLost(const ConnPtr& conn, const v1::KvFrameHeader& header,
                                      const absl::Status& why) {
  Pending* p = nullptr;
  if (Lookup(header, &p) != Match::kCurrent || !p->writers.contains(conn)) return;
  Finish(header.transfer_id(),
         absl::DataLossError(absl::StrCat("kv transfer ", header.transfer_id(),
                                          ": frame cut short: ", why.message())));
}

}  // namespace kv_receiver_internal

absl::StatusOr<std::unique_ptr<FramedKvReceiver>> FramedKvReceiver::Create(
    KvCache* cache, const FramedKvReceiverOptions& options) {
  if (options.idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("kv receiver: idle_timeout must be positive");
  }
  auto receiver = std::make_unique<kv_receiver_internal::FramedKvReceiverImpl>(cache, options);
  RETURN_IF_ERROR(receiver->Listen());
  return receiver;
}

}  // namespace pdserve
