#include "common/kv/framed_kv_sender.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/host_port.h"
#include "common/base/io_thread.h"
#include "common/base/status_macros.h"
#include "common/kv/kv_frame.h"
#include "common/kv/kv_nccl_routes.h"
#include "common/kv/kv_out_frames.h"
#include "common/kv/kv_send_connection.h"
#include "common/kv/kv_send_transfer.h"
#include "common/request/sampling_proto.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

using ConnPtr = std::shared_ptr<KvSendConnection>;
using TransferPtr = std::shared_ptr<KvSendTransfer>;

// What every connection shares; path-specific fields are set per connection.
KvSendConnectionOptions ConnectionOptions(const FramedKvSenderOptions& o) {
  KvSendConnectionOptions c;
  c.connect_timeout = o.connect_timeout;
  c.idle_timeout = o.idle_timeout;
  c.max_queued_frames = o.max_queued_frames;
  c.socket_buffer_bytes = o.socket_buffer_bytes;
  c.auth = o.auth;
  c.tls = o.tls;
  return c;
}

class FramedKvSenderImpl final : public FramedKvSender {
 public:
  FramedKvSenderImpl(const FramedKvSenderOptions& options, std::string attach_head)
      : io_("kv-send-io"),
        device_pool_(options.device_pool),
        options_(ConnectionOptions(options)),
        attach_head_(std::move(attach_head)),
        nccl_(io_, options_, [this](const ConnPtr& conn, const KvOutFrame& frame) {
          return Reserve(conn, frame);
        }) {}
  ~FramedKvSenderImpl() override;

  absl::Status SendLayer(const KvTransferTarget& target, int layer,
                         absl::Span<const int32_t> logical_blocks, KvCache& src_cache,
                         absl::Span<const int32_t> src_block_ids) override;
  absl::Status Commit(const KvTransferTarget& target, const KvCommit& commit) override;
  void Abort(const KvTransferTarget& target, std::string reason) override;
  absl::Status SendProgress(const KvTransferTarget& target) override;
  bool CudaIpcRefused(const std::string& endpoint) const override {
    absl::MutexLock lock(&mu_);
    return ipc_refused_.contains(endpoint);
  }

 private:
  using TransferKey = std::pair<std::string, uint64_t>;  // endpoint, transfer_id
  using ConnKey = std::pair<std::string, KvPath>;
  using NcclRoute = KvNcclRoutes::Route;

  absl::StatusOr<ConnPtr> Connection(const KvTransferTarget& target);
  // Forgets a dead connection. Its channel (nccl) is aborted by its thread,
  // which ends on its own: nothing waits for it here, but the thread is kept
  // (it still hands frames to io_) until it has ended.
  void Retire(absl::flat_hash_map<ConnKey, ConnPtr>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Where ABORT (and a commit without layers) goes: the path's connection,
  // except that nccl never opens one for that (it would join a channel just
  // to send a control frame): the tcp path's.
  absl::StatusOr<ConnPtr> ControlConnection(const KvTransferTarget& target);
  // nccl: the route a transfer's frames take: the one its first layer
  // took, whatever happened to the connection since (a transfer never
  // spans two channels), or a new binding to the endpoint's connection.
  absl::StatusOr<NcclRoute> RouteFor(const KvTransferTarget& target);

  // The transfer's state; created when `create`, else null if there is none.
  absl::StatusOr<TransferPtr> FindTransfer(const KvTransferTarget& target, bool create);
  // Takes a queue slot and hands the frame to the I/O thread.
  absl::Status Post(const ConnPtr& conn, KvOutFrame frame);
  // Post's halves: the slot and byte accounting, on the caller's thread...
  absl::Status Reserve(const ConnPtr& conn, const KvOutFrame& frame);
  // ...and the hand-over to the I/O thread, from any thread. A frame of a
  // failed transfer or a dead connection is released there.
  // Ends a failed transfer: no frame of it references source memory after
  // this, D is told (best effort, over `control`), and its state is
  // forgotten. A nccl transfer's route ends with it: dropping queued headers
  // whose bytes are on the channel would put the two ends out of step.
  void Abandon(const absl::StatusOr<ConnPtr>& control, const std::optional<NcclRoute>& route,
               const KvTransferTarget& target, const TransferPtr& transfer,
               const absl::Status& why);
  void PostAbortFrame(const ConnPtr& conn, const KvTransferTarget& target,
                      absl::string_view reason);
  void Forget(const KvTransferTarget& target);

  IoThread io_;  // first, so that it is destroyed after the connections
  const KvCache* const device_pool_;
  const KvSendConnectionOptions options_;
  const std::string attach_head_;  // encoded ATTACH of device_pool_, or empty
  mutable absl::Mutex mu_;
  absl::flat_hash_map<ConnKey, ConnPtr> connections_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> ipc_refused_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<TransferKey, TransferPtr> transfers_ ABSL_GUARDED_BY(mu_);
  // nccl connections' channels and the transfers bound to them.
  KvNcclRoutes nccl_;
};

FramedKvSenderImpl::~FramedKvSenderImpl() {
  std::vector<ConnPtr> conns;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, conn] : connections_) conns.push_back(conn);
  }
  // Channel threads hand frames to io_: they end first.
  nccl_.Shutdown();
  io_.RunSync([&] {
    for (const ConnPtr& c : conns) c->Fail(absl::CancelledError("kv sender shutting down"));
  });
  io_.Stop();
}

absl::StatusOr<ConnPtr> FramedKvSenderImpl::Connection(const KvTransferTarget& target) {
  if (target.path != KvPath::kTcp && device_pool_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "kv send: ", KvPathName(target.path), " transfer, but this sender has no device KV pool"));
  }
  ASSIGN_OR_RETURN(HostPort address, ParseHostPort(target.endpoint));
  if (address.host.empty() || address.port == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv send: bad endpoint \"", target.endpoint, "\""));
  }
  {
    absl::MutexLock lock(&mu_);
    const ConnKey key{target.endpoint, target.path};
    auto it = connections_.find(key);
    if (it != connections_.end() && !it->second->dead()) return it->second;
    if (it != connections_.end()) Retire(it);
    if (target.path != KvPath::kNccl) {
      KvSendConnectionOptions options = options_;
      if (target.path == KvPath::kCudaIpc) {
        options.attach_head = attach_head_;
        options.on_attach_refused = [this, endpoint = target.endpoint](const absl::Status& why) {
          LOG(WARNING) << "kv: " << endpoint << " refused cuda_ipc, auto uses tcp for it: " << why;
          absl::MutexLock lock(&mu_);
          ipc_refused_.insert(endpoint);
        };
      }
      auto conn = std::make_shared<KvSendConnection>(io_.context(), address, options);
      connections_.emplace(key, conn);
      LOG(INFO) << "kv connection to " << target.endpoint << " (" << KvPathName(target.path) << ")";
      return conn;
    }
  }
  // Outside mu_: making an id may take NCCL a moment the first time.
  ASSIGN_OR_RETURN(std::string id, device_pool_->device_memory()->NewPeerChannelId());
  absl::MutexLock lock(&mu_);
  // Another caller may have opened one meanwhile: one connection per pair.
  auto it = connections_.find(ConnKey{target.endpoint, target.path});
  if (it != connections_.end() && !it->second->dead()) return it->second;
  if (it != connections_.end()) Retire(it);
  ConnPtr conn = nccl_.Open(target, address, device_pool_->device_memory(), id);
  connections_[ConnKey{target.endpoint, target.path}] = conn;
  return conn;
}

void FramedKvSenderImpl::Retire(absl::flat_hash_map<ConnKey, ConnPtr>::iterator it) {
  nccl_.Retire(it->second);
  connections_.erase(it);
}

absl::StatusOr<ConnPtr> FramedKvSenderImpl::ControlConnection(const KvTransferTarget& target) {
  if (target.path == KvPath::kNccl) {
    KvTransferTarget tcp = target;
    tcp.path = KvPath::kTcp;
    return Connection(tcp);
  }
  return Connection(target);
}

absl::StatusOr<FramedKvSenderImpl::NcclRoute> FramedKvSenderImpl::RouteFor(
    const KvTransferTarget& target) {
  if (std::optional<NcclRoute> bound = nccl_.Bound(target)) return *bound;
  // A connection that died just now (its join failed, say) carries none of
  // this transfer's frames yet: one more try opens a fresh one.
  for (int attempt = 0;; ++attempt) {
    ASSIGN_OR_RETURN(ConnPtr conn, Connection(target));
    if (std::optional<NcclRoute> route = nccl_.Bind(target, conn)) return *route;
    if (attempt == 1) {
      return conn->dead() ? conn->death()
                          : absl::UnavailableError("kv send: the NCCL channel is gone");
    }
  }
}

absl::StatusOr<TransferPtr> FramedKvSenderImpl::FindTransfer(const KvTransferTarget& target,
                                                             bool create) {
  absl::MutexLock lock(&mu_);
  const TransferKey key{target.endpoint, target.transfer_id};
  auto it = transfers_.find(key);
  if (it != transfers_.end()) {
    if (it->second->epoch() != target.epoch) {
      return absl::FailedPreconditionError(
          absl::StrCat("kv send: transfer ", target.transfer_id, " to ", target.endpoint,
                       " is in flight with epoch ", it->second->epoch(), ", not ", target.epoch,
                       "; Commit or Abort it first"));
    }
    return it->second;
  }
  if (!create) return TransferPtr();
  auto transfer = std::make_shared<KvSendTransfer>(target.transfer_id, target.epoch);
  transfers_.emplace(key, transfer);
  return transfer;
}

absl::Status FramedKvSenderImpl::Reserve(const ConnPtr& conn, const KvOutFrame& frame) {
  if (!conn->TryReserveSlot()) {
    return absl::ResourceExhaustedError(absl::StrCat("kv send: queue to ", conn->endpoint(),
                                                     " is full (", options_.max_queued_frames,
                                                     " frames)"));
  }
  if (frame.transfer != nullptr && frame.accounted_bytes > 0) {
    frame.transfer->FrameQueued(frame.accounted_bytes);
  }
  return absl::OkStatus();
}

absl::Status FramedKvSenderImpl::Post(const ConnPtr& conn, KvOutFrame frame) {
  RETURN_IF_ERROR(Reserve(conn, frame));
  conn->PostEnqueue(std::move(frame));
  return absl::OkStatus();
}

absl::Status FramedKvSenderImpl::SendLayer(const KvTransferTarget& target, int layer,
                                           absl::Span<const int32_t> logical_blocks,
                                           KvCache& src_cache,
                                           absl::Span<const int32_t> src_block_ids) {
  RETURN_IF_ERROR(ValidateLayer(layer, logical_blocks, src_cache, src_block_ids));
  std::optional<NcclRoute> route;
  ConnPtr conn;
  if (target.path == KvPath::kNccl) {
    ASSIGN_OR_RETURN(route, RouteFor(target));
  } else {
    ASSIGN_OR_RETURN(conn, Connection(target));
  }
  ASSIGN_OR_RETURN(TransferPtr transfer, FindTransfer(target, /*create=*/true));
  RETURN_IF_ERROR(transfer->status());
  if (absl::Now() >= target.deadline) {
    const absl::Status st = absl::DeadlineExceededError(
        absl::StrCat("kv send: transfer ", target.transfer_id, " is past its deadline"));
    transfer->Fail(st);
    return st;
  }
  const size_t block_bytes = static_cast<size_t>(src_cache.layout().bytes_per_layer_block());
  v1::KvFrameHeader header = HeaderFor(target, v1::KvFrameHeader::LAYER_BLOCKS);
  header.set_layer(layer);
  for (int32_t b : logical_blocks) header.add_block_indices(static_cast<uint32_t>(b));
  header.set_payload_bytes(logical_blocks.size() * block_bytes);
  absl::StatusOr<KvOutFrame> built;
  if (target.path != KvPath::kTcp && &src_cache != device_pool_) {
    built = absl::InvalidArgumentError(absl::StrCat("kv send: ", KvPathName(target.path),
                                                    " layers must come from the device pool"));
  } else if (target.path == KvPath::kCudaIpc) {
    built = IpcLayerFrame(header, src_block_ids);
  } else if (target.path == KvPath::kNccl) {
    header.set_payload_path(v1::KvFrameHeader::PAYLOAD_NCCL);
    built = KvOutFrame{};
    built->head = EncodeKvMessage(header);
  } else {
    built = InlineLayerFrame(header, src_cache, src_block_ids);
  }
  if (!built.ok()) {
    transfer->Fail(built.status());
    return built.status();
  }
  KvOutFrame frame = std::move(*built);
  frame.transfer = transfer;
  frame.accounted_bytes = header.payload_bytes();
  const absl::Status st =
      route.has_value() ? nccl_.SendLayer(*route, layer, src_cache, src_block_ids, std::move(frame))
                        : Post(conn, std::move(frame));
  if (!st.ok()) {
    transfer->Fail(st);
    return st;
  }
  return absl::OkStatus();
}

absl::Status FramedKvSenderImpl::Commit(const KvTransferTarget& target, const KvCommit& commit) {
  // A nccl transfer's commit follows its layers on their channel.
  const std::optional<NcclRoute> route =
      target.path == KvPath::kNccl ? nccl_.Bound(target) : std::nullopt;
  absl::StatusOr<ConnPtr> control = ControlConnection(target);
  if (!route.has_value() && !control.ok()) return control.status();
  ASSIGN_OR_RETURN(TransferPtr transfer, FindTransfer(target, /*create=*/true));
  absl::Status status = transfer->status();
  if (status.ok()) {
    v1::KvFrameHeader header = HeaderFor(target, v1::KvFrameHeader::COMMIT);
    header.set_num_layers(static_cast<uint32_t>(commit.num_layers));
    header.set_total_bytes(transfer->queued_bytes());
    header.set_first_token(commit.first_token);
    if (commit.first_token_logprobs.has_value()) {
      *header.mutable_first_token_logprobs() = ToProto(*commit.first_token_logprobs);
    }
    KvOutFrame frame;
    frame.transfer = transfer;
    frame.head = EncodeKvMessage(header);
    frame.is_commit = true;
    status =
        route.has_value() ? nccl_.Post(*route, std::move(frame)) : Post(*control, std::move(frame));
    if (status.ok()) status = transfer->AwaitAck(target.deadline);
  }
  if (status.ok()) {
    Forget(target);
    return status;
  }
  Abandon(control, route, target, transfer, status);
  return status;
}

void FramedKvSenderImpl::Abort(const KvTransferTarget& target, std::string reason) {
  const absl::StatusOr<ConnPtr> control = ControlConnection(target);
  absl::StatusOr<TransferPtr> transfer = FindTransfer(target, /*create=*/false);
  if (!transfer.ok()) {
    LOG(WARNING) << "kv abort: " << transfer.status();
  } else if (*transfer != nullptr) {
    Abandon(control, nccl_.Bound(target), target, *transfer, absl::AbortedError(reason));
    return;
  }
  // Nothing in flight here, but D may hold a reservation for it.
  if (!control.ok()) {
    LOG(WARNING) << "kv abort of transfer " << target.transfer_id << ": " << control.status();
    return;
  }
  PostAbortFrame(*control, target, reason);
}

void FramedKvSenderImpl::Abandon(const absl::StatusOr<ConnPtr>& control,
                                 const std::optional<NcclRoute>& route,
                                 const KvTransferTarget& target, const TransferPtr& transfer,
                                 const absl::Status& why) {
  transfer->Fail(why);
  // A failed transfer's frames still queued on the channel's thread send
  // nothing, and those whose bytes went keep their headers, so a channel
  // that drains stays usable for the other transfers on it. One that cannot
  // is ended: its thread aborts it on the way out, and with it every GPU
  // read of ours; the other transfers on it fail (the next ones reconnect).
  if (route.has_value() && !nccl_.Drain(*route)) {
    nccl_.EndConnection(*route, transfer->transfer_id(), why);
  } else if (!route.has_value() && control.ok()) {
    io_.RunSync([&] { (*control)->DropTransfer(transfer); });
  }
  transfer->AwaitReleased();
  if (control.ok()) {
    PostAbortFrame(*control, target, why.message());
  } else {
    LOG(WARNING) << "kv abort of transfer " << target.transfer_id << ": " << control.status();
  }
  Forget(target);
}

absl::Status FramedKvSenderImpl::SendProgress(const KvTransferTarget& target) {
  // A transfer that already failed opens no connection.
  ASSIGN_OR_RETURN(TransferPtr transfer, FindTransfer(target, /*create=*/true));
  RETURN_IF_ERROR(transfer->status());
  // On the connection that carries the transfer's headers (its layers too,
  // except on the nccl path, where their order does not matter to this).
  ASSIGN_OR_RETURN(ConnPtr control, ControlConnection(target));
  // Best effort, and never in the way of layers: on a queue half full the
  // decode worker hears of this transfer again after the next step.
  if (!control->TryReserveSpareSlot()) return absl::OkStatus();
  KvOutFrame frame;
  frame.head = EncodeKvMessage(HeaderFor(target, v1::KvFrameHeader::PROGRESS));
  control->PostEnqueue(std::move(frame));
  return absl::OkStatus();
}

void FramedKvSenderImpl::PostAbortFrame(const ConnPtr& conn, const KvTransferTarget& target,
                                        absl::string_view reason) {
  v1::KvFrameHeader header = HeaderFor(target, v1::KvFrameHeader::ABORT);
  header.set_error(std::string(reason));
  KvOutFrame frame;
  frame.head = EncodeKvMessage(header);
  // Best effort: with a full queue D learns of it from its own deadline.
  Post(conn, std::move(frame)).IgnoreError();
}

void FramedKvSenderImpl::Forget(const KvTransferTarget& target) {
  absl::MutexLock lock(&mu_);
  transfers_.erase(TransferKey{target.endpoint, target.transfer_id});
  nccl_.Unbind(target);
}

}  // namespace

absl::StatusOr<std::unique_ptr<FramedKvSender>> FramedKvSender::Create(
    const FramedKvSenderOptions& options) {
  if (options.connect_timeout <= absl::ZeroDuration() ||
      options.idle_timeout <= absl::ZeroDuration() || options.max_queued_frames < 1) {
    return absl::InvalidArgumentError("kv sender: timeouts and max_queued_frames must be positive");
  }
  ASSIGN_OR_RETURN(std::string attach_head, AttachHead(options.device_pool));
  return std::make_unique<FramedKvSenderImpl>(options, std::move(attach_head));
}

}  // namespace pdserve
