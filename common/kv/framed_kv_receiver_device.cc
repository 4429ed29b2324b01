// The receiver's device paths (framed_kv_receiver_impl.h): host staging for
// device caches, CUDA IPC pulls from an attached pool, and NCCL channels,
// whose joins and receives run on each channel's own thread.
#include "absl/strings/str_cat.h"
#include "common/kv/framed_kv_receiver_impl.h"
#include "glog/logging.h"

namespace pdserve::kv_receiver_internal {

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
    p->channel_writers.insert(conn);
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
  if (Lookup(header, &p) != Match::kCurrent || !p->channel_writers.erase(conn)) {
    // Its reservation ended while the bytes came (Finish let the receive
    // complete): that ends now, and the frame is answered as one that came
    // after the end. A failed receive leaves the channel dead.
    if (EndingFedBy(conn) != nullptr) {
      SettleChannel(conn);
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
  std::vector<uint64_t> fed;
  for (const auto& [id, p] : pending_) {
    if (p->channel_writers.contains(conn)) fed.push_back(id);
    // A held-back frame of this connection will never be read: nothing of
    // it was claimed.
    std::erase_if(p->fenced, [&conn](const auto& f) { return f.first == conn; });
  }
  // A channel still receiving into some reservation's blocks is stopped in
  // the background; that reservation ends once it has (SettleChannel), not
  // on this thread, which serves every other connection meanwhile.
  if (fed.empty() && EndingFedBy(conn) == nullptr) {
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

}  // namespace pdserve::kv_receiver_internal
