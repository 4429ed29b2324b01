// The KV receiver's implementation, shared by its two source files:
// framed_kv_receiver.cc (listening, reservations, inline frames) and
// framed_kv_receiver_device.cc (the device paths: staging, CUDA IPC pulls and
// NCCL channels). Internal: include only from those two.
#ifndef PDSERVE_COMMON_KV_FRAMED_KV_RECEIVER_IMPL_H_
#define PDSERVE_COMMON_KV_FRAMED_KV_RECEIVER_IMPL_H_

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "common/base/io_thread.h"
#include "common/kv/framed_kv_receiver.h"
#include "common/kv/kv_ipc_peers.h"
#include "common/kv/kv_nccl_peers.h"
#include "common/kv/kv_receive_connection.h"
#include "common/kv/kv_reservation.h"

namespace pdserve::kv_receiver_internal {

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
  // Connections whose NCCL channel is receiving into its blocks right now.
  // A reservation that ends with some left waits in `ending_` until each has
  // finished or been stopped (InterruptEnding).
  absl::flat_hash_set<ConnPtr> channel_writers;
  // What on_done gets, kept from Finish while the channels settle.
  absl::StatusOr<KvCommit> result = absl::UnknownError("kv reservation: not finished");
  // Layer frames held back (their connections deferred) while an ended
  // epoch of the same transfer still writes into the same blocks; planned
  // again once it stops, or when this reservation ends.
  std::vector<std::pair<ConnPtr, v1::KvFrameHeader>> fenced;
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
  // into them any more: before Finish returns, or when the last channel
  // settles (SettleChannel). Never waits.
  void Finish(uint64_t transfer_id, absl::StatusOr<KvCommit> result);
  // on_done of an ended reservation, with Finish's result.
  void Complete(std::unique_ptr<Pending> p);
  // The ended reservation conn's channel is receiving into, or null.
  Pending* EndingFedBy(const ConnPtr& conn);
  // conn's channel finished its receive or was stopped: the reservation it
  // fed completes once no other channel writes into it (CompleteSettled).
  void SettleChannel(const ConnPtr& conn);
  // Completes the ended epochs of `transfer_id`, oldest first, while no
  // channel writes into them (an epoch's blocks are the next one's too);
  // once none is left, the pending epoch's held frames go on.
  void CompleteSettled(uint64_t transfer_id);
  // Interrupts the NCCL receives still writing into ended epochs of
  // `transfer_id` (their connections close; each settles once its channel
  // has stopped): after a deadline, or for a new epoch, which should wait
  // for an abort rather than for a peer that may be gone.
  void InterruptEnding(uint64_t transfer_id);
  // Whether an ended epoch of `transfer_id` still writes into its blocks:
  // a new epoch's layer frames wait (Pending::fenced).
  bool Fenced(uint64_t transfer_id) const;
  // Plans again the frames p held back (after its fence, or its end).
  void ReleaseFenced(Pending* p);
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
  // Ended reservations whose on_done waits for NCCL receives to settle.
  std::vector<std::unique_ptr<Pending>> ending_;
  absl::flat_hash_set<ConnPtr> connections_;
};

// Frame plans that need no receiver state.
KvFramePlan DeferPlan();
// Answers with `status` and closes the connection.
KvFramePlan CloseWith(uint64_t transfer_id, uint64_t epoch, const absl::Status& status);
// Answers a frame that names no current reservation.
KvFramePlan SkipNonCurrent(const v1::KvFrameHeader& header, Match match);

}  // namespace pdserve::kv_receiver_internal

#endif  // PDSERVE_COMMON_KV_FRAMED_KV_RECEIVER_IMPL_H_
