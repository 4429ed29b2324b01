#include "common/kv/framed_kv_receiver.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/base/host_port.h"
#include "common/base/io_thread.h"
#include "common/base/status_macros.h"
#include "common/kv/kv_epoch_fence.h"
#include "common/kv/kv_frame.h"
#include "common/kv/kv_ipc_peers.h"
#include "common/kv/kv_nccl_peers.h"
#include "common/kv/kv_receive_connection.h"
#include "common/kv/kv_reservation.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);

using ConnPtr = std::shared_ptr<KvReceiveConnection>;

// One pending Expect and the I/O state around its KvReservation.
struct Pending {
  explicit Pending(boost::asio::io_context& io) : deadline_timer(io) {}
  std::unique_ptr<KvReservation> reservation;
  KvReceiver::DoneCallback on_done;
  boost::asio::steady_timer deadline_timer;
  // The wait Expect gave (its deadline - the time of the call), and when the
  // timer fires: each layer frame that arrives moves it to arrival + window.
  absl::Duration window;
  absl::Time expires;
  // Connections reading a payload into this reservation's blocks right now;
  // closed when the reservation ends so they stop writing at once.
  absl::flat_hash_set<ConnPtr> writers;
  // (Connections whose NCCL channel receives into its blocks, and its
  // layer frames held back behind an older epoch: the receiver's fence_.)
  // What on_done gets, kept from Finish while the channels settle.
  absl::StatusOr<KvCommit> result = absl::UnknownError("kv reservation: not finished");
  // Device caches only: the host buffer each writer's payload lands in, and
  // the device blocks it is copied to once complete.
  struct Staging {
    std::vector<uint8_t> bytes;
    std::vector<uint8_t*> blocks;
  };
  absl::flat_hash_map<ConnPtr, Staging> staging;
};

// How a frame's (transfer_id, epoch) relates to the pending reservations.
enum class Match { kUnknown, kStale, kFuture, kCurrent };

// Read nothing further until Resume.
KvFramePlan DeferPlan() {
  KvFramePlan plan;
  plan.action = KvFramePlan::Action::kDefer;
  return plan;
}

// Answers with `status` and closes the connection.
KvFramePlan CloseWith(uint64_t transfer_id, uint64_t epoch, const absl::Status& status) {
  KvFramePlan plan;
  plan.action = KvFramePlan::Action::kClose;
  plan.ack = MakeKvAck(transfer_id, epoch, status);
  plan.ack->set_closing(true);
  return plan;
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

class FramedKvReceiverImpl final : public FramedKvReceiver, public KvFrameSink {
 public:
  FramedKvReceiverImpl(KvCache* cache, const FramedKvReceiverOptions& options)
      : cache_(cache),
        options_(options),
        io_("kv-recv-io"),
        acceptor_(io_.context()),
        accept_retry_(io_.context()) {}
  ~FramedKvReceiverImpl() override;

  absl::Status Listen();
  uint16_t port() const override { return port_; }
  absl::Status Expect(uint64_t transfer_id, uint64_t epoch, std::vector<int32_t> dst_block_ids,
                      int num_layers, absl::Time deadline, DoneCallback on_done) override;
  void Cancel(uint64_t transfer_id) override;
  size_t num_pending() const override { return num_pending_.load(); }

  KvFramePlan OnHeader(const ConnPtr& conn, const v1::KvFrameHeader& header) override;
  void OnPayloadWritten(const ConnPtr& conn, const v1::KvFrameHeader& header) override;
  void OnPayloadLost(const ConnPtr& conn, const v1::KvFrameHeader& header,
                     const absl::Status& why) override;
  void OnClosed(const ConnPtr& conn) override;

 private:
  void Accept();
  absl::Status Install(std::unique_ptr<KvReservation> reservation, absl::Time deadline,
                       DoneCallback on_done);
  void OnDeadline(uint64_t transfer_id, uint64_t epoch);
  // (Re)starts p's timer to fire at `at`.
  void ArmDeadline(Pending* p, absl::Time at);
  // A sign that p's sender works on it: its wait restarts.
  void NoteProgress(Pending* p);
  KvFramePlan PlanProgress(const v1::KvFrameHeader& header);
  // Ends a reservation: TCP writes into its blocks stop at once; an NCCL
  // receive into them is left to complete. on_done runs once nothing writes
  // into them any more (fence_): before Finish returns, or when the last
  // channel settles (SettleChannel). Never waits.
  void Finish(uint64_t transfer_id, absl::StatusOr<KvCommit> result);
  // on_done of an ended reservation, with Finish's result.
  void Complete(std::unique_ptr<Pending> p);
  // The ended reservation the fence named `ticket`, out of ending_.
  std::unique_ptr<Pending> TakeEnding(KvEpochFence::Ticket ticket);
  // conn's channel finished its receive into an ended epoch, or was
  // stopped: the epochs that no channel writes into any more complete.
  void SettleChannel(const ConnPtr& conn);
  // Completes the ended epochs of `transfer_id` the fence lets go, oldest
  // first; once none is left, the pending epoch's held frames go on.
  void CompleteSettled(uint64_t transfer_id);
  // Interrupts the NCCL receives still writing into ended epochs of
  // `transfer_id` (their connections close; each settles once its channel
  // has stopped): after a deadline, or for a new epoch, which should wait
  // for an abort rather than for a peer that may be gone.
  void InterruptEnding(uint64_t transfer_id);
  // Plans again layer frames the fence held back (after the fence, or the
  // end of their epoch).
  void Replan(std::vector<KvEpochFence::HeldFrame> frames);
  Match Lookup(const v1::KvFrameHeader& header, Pending** pending);
  KvFramePlan PlanLayer(const ConnPtr& conn, const v1::KvFrameHeader& header);
  // Device caches: copies conn's staged payload into its device blocks.
  absl::Status Unstage(Pending* p, const ConnPtr& conn);
  KvFramePlan PlanCommit(const v1::KvFrameHeader& header);
  // ATTACH (CUDA IPC) or NCCL_HELLO: sets up the connection's device path.
  KvFramePlan PlanAttach(const ConnPtr& conn, const v1::KvFrameHeader& header);
  // PAYLOAD_CUDA_IPC / PAYLOAD_NCCL: brings the blocks in now (copy from
  // the attached pool, or receive from the channel), then counts them.
  KvFramePlan PullLayer(const ConnPtr& conn, const v1::KvFrameHeader& header, Pending* p);
  // A PAYLOAD_NCCL frame of no current reservation: its bytes are taken off
  // the channel all the same, then the frame is answered.
  KvFramePlan DrainLayer(const ConnPtr& conn, const v1::KvFrameHeader& header, Match match);
  // The channel finished receiving a current frame's blocks.
  void OnChannelReceived(const ConnPtr& conn, const v1::KvFrameHeader& header,
                         const absl::Status& status);
  KvFramePlan PlanAbort(const v1::KvFrameHeader& header);
  // A frame that does not validate: fail its reservation (if it is the
  // current one), answer with the error and close the connection.
  KvFramePlan Reject(const v1::KvFrameHeader& header, const absl::Status& status);

  KvCache* const cache_;
  const FramedKvReceiverOptions options_;
  const int64_t bytes_per_layer_block_ = cache_->layout().bytes_per_layer_block();
  KvIpcPeers ipc_peers_{cache_};
  // Posts to io_, which is declared later but only used once running.
  KvNcclPeers nccl_peers_{
      cache_,
      [this](std::function<void()> task) { boost::asio::post(io_.context(), std::move(task)); },
      options_.idle_timeout, options_.idle_timeout};
  std::atomic<size_t> num_pending_{0};
  uint16_t port_ = 0;

  // Everything below lives on the I/O thread. io_ goes first so that it is
  // destroyed last, after the sockets and timers that use it.
  IoThread io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_retry_;
  bool stopping_ = false;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Pending>> pending_;
  // Who may still write into each transfer's blocks, across its epochs.
  KvEpochFence fence_;
  // Ended reservations whose on_done waits for the fence, by its ticket.
  absl::flat_hash_map<KvEpochFence::Ticket, std::unique_ptr<Pending>> ending_;
  absl::flat_hash_set<ConnPtr> connections_;
};

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
    for (KvEpochFence::Ticket t : fence_.TakeAllEnded()) Complete(TakeEnding(t));
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
    auto conn = std::make_shared<KvReceiveConnection>(
        KvStream(std::move(socket), options_.tls), this, options_.idle_timeout, options_.auth);
    connections_.insert(conn);
    conn->Start();
    Accept();
  });
}

absl::Status FramedKvReceiverImpl::Expect(uint64_t transfer_id, uint64_t epoch,
                                          std::vector<int32_t> dst_block_ids, int num_layers,
                                          absl::Time deadline, DoneCallback on_done) {
  RETURN_IF_ERROR(
      KvReservation::Validate(dst_block_ids, num_layers, cache_->layout(), cache_->num_ids()));
  if (!on_done) return absl::InvalidArgumentError("kv reservation: no on_done callback");
  if (deadline <= absl::Now()) {
    return absl::DeadlineExceededError(
        absl::StrCat("kv reservation ", transfer_id, ": deadline already passed"));
  }
  auto reservation = std::make_unique<KvReservation>(transfer_id, epoch, std::move(dst_block_ids),
                                                     num_layers, cache_->layout());
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
  // epoch's frames wait for that (fence_), not this (the engine's) thread.
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
  fence_.Open(id, epoch);
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
  KvEpochFence::Ended end = fence_.End(transfer_id);
  if (end.waits_as.has_value()) {
    // An NCCL receive into the blocks is in progress, or an older epoch's
    // still writes into the same blocks. Waiting here for it to end would
    // block the caller (Cancel and Expect come from the engine thread): the
    // reservation waits in ending_ instead, and completes once its
    // channels, and the older epochs', settle. The receive is left to
    // complete (bounded by the frame timeout), which keeps the channel in
    // step for the connection's other transfers; InterruptEnding cuts it
    // short.
    ending_.emplace(*end.waits_as, std::move(p));
  }
  Replan(std::move(end.released));  // no longer current: drained or skipped
  if (!end.waits_as.has_value()) Complete(std::move(p));
}

void FramedKvReceiverImpl::Complete(std::unique_ptr<Pending> p) {
  num_pending_.fetch_sub(1);
  p->on_done(std::move(p->result));
}

std::unique_ptr<Pending> FramedKvReceiverImpl::TakeEnding(KvEpochFence::Ticket ticket) {
  auto node = ending_.extract(ticket);
  CHECK(!node.empty()) << "kv receiver: the fence named an epoch that is not ending";
  return std::move(node.mapped());
}

void FramedKvReceiverImpl::SettleChannel(const ConnPtr& conn) {
  if (std::optional<uint64_t> id = fence_.SettleChannel(conn)) CompleteSettled(*id);
}

void FramedKvReceiverImpl::CompleteSettled(uint64_t transfer_id) {
  // One at a time: an on_done that ends another epoch of the transfer
  // finds the older ones still waiting, so it completes after them.
  while (std::optional<KvEpochFence::Ticket> t = fence_.NextSettled(transfer_id)) {
    Complete(TakeEnding(*t));
  }
  // Nothing of an ended epoch writes into the blocks any more, if none is
  // left: the pending epoch's held frames go on.
  Replan(fence_.Unfence(transfer_id));
}

void FramedKvReceiverImpl::InterruptEnding(uint64_t transfer_id) {
  const std::vector<ConnPtr> conns = fence_.EndedWriters(transfer_id);
  const absl::Status why =
      absl::AbortedError(absl::StrCat("kv transfer ", transfer_id, " has a newer epoch"));
  for (const ConnPtr& c : conns) c->Close(why);  // OnClosed stops the channel
}

void FramedKvReceiverImpl::Replan(std::vector<KvEpochFence::HeldFrame> frames) {
  for (const auto& [conn, header] : frames) conn->Resume(PlanLayer(conn, header));
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
      CheckKvFrameShape(header, bytes_per_layer_block_, cache_->num_ids());
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

KvFramePlan FramedKvReceiverImpl::Reject(const v1::KvFrameHeader& header,
                                         const absl::Status& status) {
  Pending* p = nullptr;
  if (Lookup(header, &p) == Match::kCurrent) Finish(header.transfer_id(), status);
  return CloseWith(header.transfer_id(), header.epoch(), status);
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
  if (fence_.HoldIfFenced(header.transfer_id(), conn, header)) {
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

// The device paths: host staging for device caches, CUDA IPC pulls from an
// attached pool, and NCCL channels, whose joins and receives run on each
// channel's own thread.

KvFramePlan FramedKvReceiverImpl::PullLayer(const ConnPtr& conn, const v1::KvFrameHeader& header,
                                            Pending* p) {
  std::vector<uint8_t*> dst;
  dst.reserve(header.block_indices_size());
  for (uint32_t logical : header.block_indices()) {
    dst.push_back(cache_->LayerBlock(header.layer(), p->reservation->dst_block(logical)));
  }
  if (header.payload_path() == v1::KvFrameHeader::PAYLOAD_NCCL) {
    const absl::Status st = nccl_peers_.Receive(
        conn.get(), header, std::move(dst),
        [this, conn, header](absl::Status st) { OnChannelReceived(conn, header, st); });
    if (!st.ok()) return Reject(header, st);
    fence_.BeginChannelWrite(header.transfer_id(), conn);
    return DeferPlan();
  }
  // A device-to-device copy on this GPU: short, and it waits on no peer.
  const absl::Status st = ipc_peers_.Pull(conn.get(), header, dst);
  if (!st.ok()) {
    LOG(WARNING) << "kv transfer " << header.transfer_id() << ": " << st;
    return Reject(header, st);
  }
  p->reservation->AddWrittenBytes(header.payload_bytes());
  return KvFramePlan{};  // kSkip of no wire bytes
}

KvFramePlan FramedKvReceiverImpl::DrainLayer(const ConnPtr& conn, const v1::KvFrameHeader& header,
                                             Match match) {
  std::vector<uint8_t*> drop(header.block_indices_size(), nullptr);
  // A broken channel ends the connection; no reservation was fed by this
  // frame.
  const absl::Status st = nccl_peers_.Receive(
      conn.get(), header, std::move(drop), [conn, header, match](absl::Status st) {
        conn->Resume(st.ok() ? SkipNonCurrent(header, match)
                             : CloseWith(header.transfer_id(), header.epoch(), st));
      });
  return st.ok() ? DeferPlan() : CloseWith(header.transfer_id(), header.epoch(), st);
}

void FramedKvReceiverImpl::OnChannelReceived(const ConnPtr& conn, const v1::KvFrameHeader& header,
                                             const absl::Status& status) {
  Pending* p = nullptr;
  if (Lookup(header, &p) != Match::kCurrent ||
      !fence_.EndChannelWrite(header.transfer_id(), conn)) {
    // Its reservation ended while the bytes came (Finish let the receive
    // complete): that ends now, and the frame is answered as one that came
    // after the end. A failed receive leaves the channel dead.
    if (std::optional<uint64_t> id = fence_.SettleChannel(conn)) {
      CompleteSettled(*id);
      conn->Resume(status.ok() ? SkipNonCurrent(header, Match::kUnknown)
                               : CloseWith(header.transfer_id(), header.epoch(), status));
      return;
    }
    LOG(DFATAL) << "kv transfer " << header.transfer_id() << ": a channel receive outlived it";
    conn->Close(absl::InternalError("kv receiver: a channel receive outlived its transfer"));
    return;
  }
  if (!status.ok()) {
    LOG(WARNING) << "kv transfer " << header.transfer_id() << ": " << status;
    conn->Resume(Reject(header, status));
    return;
  }
  p->reservation->AddWrittenBytes(header.payload_bytes());
  conn->Resume(KvFramePlan{});
}

KvFramePlan FramedKvReceiverImpl::PlanAttach(const ConnPtr& conn, const v1::KvFrameHeader& header) {
  auto refuse = [conn](const absl::Status& st) {
    LOG(WARNING) << "kv receiver: refused the device path of " << conn->peer() << ": " << st;
    return CloseWith(0, 0, st);
  };
  if (header.kind() == v1::KvFrameHeader::NCCL_HELLO) {
    // The join waits for the peer: on the channel's own thread.
    const absl::Status st = nccl_peers_.Hello(conn.get(), header, [conn, refuse](absl::Status st) {
      conn->Resume(st.ok() ? KvFramePlan{} : refuse(st));
    });
    return st.ok() ? DeferPlan() : refuse(st);
  }
  const absl::Status st = ipc_peers_.Attach(conn.get(), header);
  return st.ok() ? KvFramePlan{} : refuse(st);
}

void FramedKvReceiverImpl::OnClosed(const ConnPtr& conn) {
  ipc_peers_.Forget(conn.get());
  // Its held-back frames are dropped; `fed` are the pending reservations
  // its channel is receiving into.
  const std::vector<uint64_t> fed = fence_.DropConnection(conn);
  // A channel still receiving into some reservation's blocks is stopped in
  // the background; that reservation ends once it has (SettleChannel), not
  // on this thread, which serves every other connection meanwhile.
  if (fed.empty() && !fence_.FeedsEnded(conn)) {
    nccl_peers_.Forget(conn.get());
  } else {
    nccl_peers_.Forget(conn.get(), [this, conn] { SettleChannel(conn); });
  }
  for (uint64_t id : fed) {
    // An earlier Finish may have closed connections that ended this one.
    if (!pending_.contains(id)) continue;
    Finish(id, absl::DataLossError(absl::StrCat("kv transfer ", id, ": connection from ",
                                                conn->peer(), " closed mid-receive")));
  }
  connections_.erase(conn);
}

absl::Status FramedKvReceiverImpl::Unstage(Pending* p, const ConnPtr& conn) {
  auto it = p->staging.find(conn);
  if (it == p->staging.end()) return absl::OkStatus();
  const Pending::Staging& st = it->second;
  const absl::Status status = cache_->device_memory()->ScatterFromHost(
      st.bytes.data(), st.blocks, static_cast<size_t>(bytes_per_layer_block_));
  p->staging.erase(it);
  return status;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FramedKvReceiver>> FramedKvReceiver::Create(
    KvCache* cache, const FramedKvReceiverOptions& options) {
  if (options.idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("kv receiver: idle_timeout must be positive");
  }
  auto receiver = std::make_unique<FramedKvReceiverImpl>(cache, options);
  RETURN_IF_ERROR(receiver->Listen());
  return receiver;
}

}  // namespace pdserve
