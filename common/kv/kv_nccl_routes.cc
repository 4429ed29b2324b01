#include "common/kv/kv_nccl_routes.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/base/status_macros.h"
#include "common/kv/kv_frame.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

// Why a frame queued on a stopped NCCL channel fails: the connection's
// death when it died (a refused hello says why), else a plain stop.
absl::Status StoppedChannel(const KvSendConnection& conn) {
  return conn.dead() ? conn.death() : absl::CancelledError("kv send: the NCCL channel was stopped");
}

// How a shared nccl connection dies because one transfer on it failed: the
// others get UNAVAILABLE (retryable elsewhere), never that transfer's own
// code (NOT_FOUND, INVALID_ARGUMENT, ... would end their requests for good).
absl::Status EndedBy(uint64_t transfer_id, const absl::Status& why) {
  return absl::UnavailableError(absl::StrCat("kv connection ended: transfer ", transfer_id,
                                             " on it failed: ", why.message()));
}

}  // namespace

KvNcclRoutes::KvNcclRoutes(IoThread& io, const KvSendConnectionOptions& options, Reserve reserve)
    : io_(io), options_(options), reserve_(std::move(reserve)) {}

KvNcclRoutes::ConnPtr KvNcclRoutes::Open(const KvTransferTarget& target, const HostPort& address,
                                         const KvDeviceMemory* memory,
                                         const std::string& channel_id) {
  // The receiver joins when it reads the hello; both wait for each other,
  // here on the channel's thread. Bounded by the connect timeout too, and
  // cut short when the connection dies (a receiver that refused the hello
  // never joins).
  auto thread = std::make_shared<KvChannelThread>();
  KvSendConnectionOptions options = options_;
  options.single_use = true;
  options.on_death = [weak = std::weak_ptr<KvChannelThread>(thread)] {
    if (std::shared_ptr<KvChannelThread> t = weak.lock()) t->Interrupt();
  };
  auto conn = std::make_shared<KvSendConnection>(io_.context(), address, options);
  const absl::Time join_by = std::min(target.deadline, absl::Now() + options_.connect_timeout);
  thread->Submit([this, conn, raw = thread.get(), memory, id = channel_id, join_by,
                  endpoint = target.endpoint](bool cancelled) {
    if (cancelled) return;
    absl::StatusOr<std::unique_ptr<KvPeerChannel>> channel =
        memory->JoinPeerChannel(id, /*rank=*/0, join_by, raw->interrupted_flag());
    const absl::Status st = channel.ok() ? raw->Adopt(std::move(*channel)) : channel.status();
    if (!st.ok()) {
      // The receiver's refusal says more than our timeout.
      const absl::Status why = conn->dead() ? conn->death() : st;
      raw->SetJoinError(absl::Status(
          why.code(), absl::StrCat("kv send: NCCL channel to ", endpoint, ": ", why.message())));
      conn->PostFail(raw->join_error());
      return;
    }
    LOG(INFO) << "kv connection to " << endpoint << " (nccl)";
  });
  // The hello goes first: every other frame of the connection passes the
  // channel's thread, behind the join, which needs the hello to finish.
  v1::KvFrameHeader hello;
  hello.set_kind(v1::KvFrameHeader::NCCL_HELLO);
  hello.set_nccl_id(channel_id);
  KvOutFrame frame;
  frame.head = EncodeKvMessage(hello);
  conn->TryReserveSlot();  // a fresh queue: always room
  conn->PostEnqueue(std::move(frame));
  absl::MutexLock lock(&mu_);
  channels_.emplace(conn, std::move(thread));
  return conn;
}

void KvNcclRoutes::Retire(const ConnPtr& conn) {
  absl::MutexLock lock(&mu_);
  std::erase_if(retired_, [](const std::shared_ptr<KvChannelThread>& t) { return t->stopped(); });
  if (auto ch = channels_.find(conn); ch != channels_.end()) {
    ch->second->Interrupt();
    retired_.push_back(std::move(ch->second));
    channels_.erase(ch);
  }
}

std::optional<KvNcclRoutes::Route> KvNcclRoutes::Bind(const KvTransferTarget& target,
                                                      const ConnPtr& conn) {
  absl::MutexLock lock(&mu_);
  const TransferKey key{target.endpoint, target.transfer_id};
  if (auto it = routes_.find(key); it != routes_.end()) return it->second;
  auto ch = channels_.find(conn);
  if (ch == channels_.end() || conn->dead()) return std::nullopt;
  return routes_.emplace(key, Route{conn, ch->second}).first->second;
}

std::optional<KvNcclRoutes::Route> KvNcclRoutes::Bound(const KvTransferTarget& target) const {
  absl::MutexLock lock(&mu_);
  auto it = routes_.find(TransferKey{target.endpoint, target.transfer_id});
  if (it == routes_.end()) return std::nullopt;
  return it->second;
}

void KvNcclRoutes::Unbind(const KvTransferTarget& target) {
  absl::MutexLock lock(&mu_);
  routes_.erase(TransferKey{target.endpoint, target.transfer_id});
}

absl::Status KvNcclRoutes::SendLayer(const Route& route, int layer, KvCache& src_cache,
                                     absl::Span<const int32_t> src_block_ids, KvOutFrame frame) {
  if (route.conn->dead()) return route.conn->death();
  std::vector<const uint8_t*> blocks;
  blocks.reserve(src_block_ids.size());
  for (int32_t b : src_block_ids) blocks.push_back(src_cache.LayerBlock(layer, b));
  const size_t block_bytes = static_cast<size_t>(src_cache.layout().bytes_per_layer_block());
  RETURN_IF_ERROR(reserve_(route.conn, frame));
  // Held by pointer: the job is copied into a std::function.
  auto held = std::make_shared<KvOutFrame>(std::move(frame));
  auto job = [this, conn = route.conn, raw = route.thread.get(), blocks = std::move(blocks),
              block_bytes, held](bool cancelled) {
    absl::Status st = cancelled ? StoppedChannel(*conn) : held->transfer->status();
    if (!st.ok()) {
      // Neither the bytes nor the header go: the two ends stay in step.
    } else if (raw->channel() == nullptr) {
      st = raw->join_error();
    } else {
      st = raw->channel()->SendBlocks(blocks, block_bytes);
      if (st.ok()) {
        held->on_channel = true;  // from now on its header must follow
      } else {
        // Bytes that may be half on the channel without their header put
        // the two ends out of step: the connection (and channel) must go.
        conn->PostFail(EndedBy(held->transfer->transfer_id(), st));
      }
    }
    if (!st.ok()) held->transfer->Fail(st);
    conn->PostEnqueue(std::move(*held));  // released there when failed
  };
  if (!route.thread->Submit(std::move(job))) {
    const absl::Status st = StoppedChannel(*route.conn);
    held->transfer->Fail(st);
    route.conn->PostEnqueue(std::move(*held));
    return st;
  }
  return absl::OkStatus();
}

absl::Status KvNcclRoutes::Post(const Route& route, KvOutFrame frame) {
  RETURN_IF_ERROR(reserve_(route.conn, frame));
  auto held = std::make_shared<KvOutFrame>(std::move(frame));
  auto job = [this, conn = route.conn, held](bool cancelled) {
    if (cancelled && held->transfer != nullptr) held->transfer->Fail(StoppedChannel(*conn));
    conn->PostEnqueue(std::move(*held));
  };
  if (!route.thread->Submit(std::move(job))) route.conn->PostEnqueue(std::move(*held));
  return absl::OkStatus();
}

bool KvNcclRoutes::Drain(const Route& route) {
  if (!route.thread->joined()) return false;
  absl::Notification drained;
  absl::Status st = absl::CancelledError("kv send: the NCCL channel was stopped");
  const absl::Duration timeout = options_.idle_timeout;
  const bool queued = route.thread->Submit([&, raw = route.thread.get()](bool cancelled) {
    if (!cancelled && raw->channel() != nullptr) st = raw->channel()->Wait(absl::Now() + timeout);
    drained.Notify();
  });
  if (!queued) return false;
  drained.WaitForNotification();  // bounded: the wait has a deadline
  if (!st.ok()) LOG(WARNING) << "kv: the NCCL channel to " << route.conn->endpoint() << ": " << st;
  return st.ok();
}

void KvNcclRoutes::EndConnection(const Route& route, uint64_t transfer_id,
                                 const absl::Status& why) {
  // The connection first, so the frames the thread hands back fail with
  // its death (UNAVAILABLE), then the wait for the thread: no GPU read of
  // ours outlives this call (nor the abandon of any other transfer on it,
  // which waits for the same thread).
  const absl::Status ended = EndedBy(transfer_id, why);
  io_.RunSync([&] { route.conn->Fail(ended); });
  route.thread->Interrupt();
  route.thread->AwaitStopped();
}

void KvNcclRoutes::Shutdown() {
  std::vector<std::shared_ptr<KvChannelThread>> threads;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [conn, thread] : channels_) threads.push_back(thread);
    threads.insert(threads.end(), retired_.begin(), retired_.end());
  }
  for (const auto& t : threads) t->Interrupt();
  for (const auto& t : threads) t->AwaitStopped();
}

}  // namespace pdserve
