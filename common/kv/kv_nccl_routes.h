// KvNcclRoutes: the prefill side of the nccl KV path (common/kv/kv_path.h),
// the sender's counterpart of KvNcclPeers. It opens each single-use nccl
// connection (NCCL_HELLO first, then the channel joined as rank 0), keeps
// every such connection's channel thread, and binds each transfer to the
// route its first layer took, so that its commit and abort follow its
// layers on the same channel. On a route, a layer's bytes are gathered and
// sent on the channel's thread and its header queued after them; so are
// commits, in channel order.
//
// Frames reach their connection through the sender's queue accounting
// (Reserve, given at construction) and its I/O thread. A dead connection's
// channel thread is interrupted and kept until it has ended (it still
// hands frames to the I/O thread).
//
// Thread-safety: thread-safe. Shutdown before the I/O thread stops.
#ifndef PDSERVE_COMMON_KV_KV_NCCL_ROUTES_H_
#define PDSERVE_COMMON_KV_KV_NCCL_ROUTES_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/base/host_port.h"
#include "common/base/io_thread.h"
#include "common/engine/kv_cache.h"
#include "common/kv/kv_channel_thread.h"
#include "common/kv/kv_send_connection.h"
#include "common/kv/kv_transport.h"

namespace pdserve {

class KvNcclRoutes {
 public:
  using ConnPtr = std::shared_ptr<KvSendConnection>;
  // Takes a queue slot on the connection for the frame (and counts its
  // bytes into its transfer), or says why not.
  using Reserve = std::function<absl::Status(const ConnPtr&, const KvOutFrame&)>;

  // A nccl connection and the thread of its channel, which every frame of
  // the connection after the hello goes through.
  struct Route {
    ConnPtr conn;
    std::shared_ptr<KvChannelThread> thread;
  };

  // `io` runs the connections; `options` are the sender's (connect and idle
  // timeouts bound joins and drains). Both outlive this.
  KvNcclRoutes(IoThread& io, const KvSendConnectionOptions& options, Reserve reserve);
  KvNcclRoutes(const KvNcclRoutes&) = delete;
  KvNcclRoutes& operator=(const KvNcclRoutes&) = delete;

  // A new single-use connection to `address` whose channel `channel_id` of
  // `memory` is joined on the channel's own thread (bounded by the
  // target's deadline and the connect timeout, cut short when the
  // connection dies); its NCCL_HELLO is queued already.
  ConnPtr Open(const KvTransferTarget& target, const HostPort& address,
               const KvDeviceMemory* memory, const std::string& channel_id);
  // conn died: its channel is interrupted, without waiting. No-op for a
  // connection this did not open.
  void Retire(const ConnPtr& conn);

  // The transfer's route: the one it is bound to, else a new binding to
  // conn's channel. Nullopt when it has none and conn is dead or has no
  // channel.
  std::optional<Route> Bind(const KvTransferTarget& target, const ConnPtr& conn);
  // The transfer's route, if it has one.
  std::optional<Route> Bound(const KvTransferTarget& target) const;
  // Forgets the transfer's route.
  void Unbind(const KvTransferTarget& target);

  // On the channel's thread, the send of the blocks, then the header. On an
  // error the frame's transfer has failed.
  absl::Status SendLayer(const Route& route, int layer, KvCache& src_cache,
                         absl::Span<const int32_t> src_block_ids, KvOutFrame frame);
  // The frame goes after everything queued on the channel's thread.
  absl::Status Post(const Route& route, KvOutFrame frame);
  // Waits, behind everything queued on the channel's thread, until every
  // byte sent on the channel so far has left (so no GPU work reads a
  // source block any more). False when it cannot: not joined yet, stopped,
  // or the wait failed (the channel is then dead).
  bool Drain(const Route& route);
  // Ends the route's connection because `transfer_id` failed (`why`) and
  // its channel could not drain: the other transfers on it fail with
  // UNAVAILABLE; returns once no GPU work of the channel reads a source
  // block any more.
  void EndConnection(const Route& route, uint64_t transfer_id, const absl::Status& why);

  // Interrupts every channel thread and waits until each has ended.
  void Shutdown();

 private:
  using TransferKey = std::pair<std::string, uint64_t>;  // endpoint, transfer_id

  IoThread& io_;
  const KvSendConnectionOptions options_;
  const Reserve reserve_;
  mutable absl::Mutex mu_;
  // Live nccl connections' channels, each with its thread.
  absl::flat_hash_map<ConnPtr, std::shared_ptr<KvChannelThread>> channels_ ABSL_GUARDED_BY(mu_);
  // Channel threads of dead connections, until they have ended.
  std::vector<std::shared_ptr<KvChannelThread>> retired_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<TransferKey, Route> routes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_NCCL_ROUTES_H_
