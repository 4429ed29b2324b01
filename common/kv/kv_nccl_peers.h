// KvNcclPeers: the decode side of the nccl KV path (common/kv/kv_path.h). Each
// nccl connection's sender first sends NCCL_HELLO with a channel id; this
// joins the channel as rank 1, and for every PAYLOAD_NCCL layer frame
// receives the frame's bytes from it, in frame order, into the reserved
// blocks (or into nothing, for a frame of a dead epoch: the bytes must
// still be taken off the channel to keep both ends in step). Channels end
// with their connection.
//
// Joining and receiving wait on the peer, so each connection's channel has
// a thread of its own (KvChannelThread): the receiver's I/O thread only
// starts the work and gets the outcome back as a task posted to it. A
// stalled or dead peer thus holds up its own connection, never the other
// prefill workers' transfers.
//
// Calls are made on the KV receiver's I/O thread; `done` callbacks run there
// too, and never after Forget of their connection.
#ifndef PDSERVE_COMMON_KV_KV_NCCL_PEERS_H_
#define PDSERVE_COMMON_KV_KV_NCCL_PEERS_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/engine/kv_cache.h"
#include "common/kv/kv_channel_thread.h"
#include "pdserve/v1/kv_frame.pb.h"

namespace pdserve {

class KvNcclPeers {
 public:
  using Done = std::function<void(absl::Status)>;
  // Runs a task on the I/O thread (asio::post in the receiver).
  using Post = std::function<void(std::function<void()>)>;

  KvNcclPeers(KvCache* cache, Post post, absl::Duration join_timeout, absl::Duration frame_timeout);
  // Shutdown().
  ~KvNcclPeers();
  KvNcclPeers(const KvNcclPeers&) = delete;
  KvNcclPeers& operator=(const KvNcclPeers&) = delete;

  // An NCCL_HELLO on connection `conn`: joins its channel in the
  // background. FAILED_PRECONDITION at once (and no `done`) when this cache
  // cannot open NCCL channels; otherwise `done` gets the join's outcome.
  absl::Status Hello(const void* conn, const v1::KvFrameHeader& header, Done done);
  // Receives a PAYLOAD_NCCL frame's blocks into `dst` (one per entry of
  // block_indices; null = receive and drop) in the background; `done` gets
  // the outcome once every byte is in place. An error at once (no `done`)
  // when the connection has no channel. After any error the channel is
  // dead: close the connection.
  absl::Status Receive(const void* conn, const v1::KvFrameHeader& header, std::vector<uint8_t*> dst,
                       Done done);
  // The connection ended: its channel is interrupted and torn down in the
  // background, without waiting. Its `done` never runs; `stopped`, if
  // given, runs on the I/O thread once the channel can no longer write into
  // any block (at once, posted, when conn has no channel). Not after
  // Shutdown.
  void Forget(const void* conn, std::function<void()> stopped = nullptr);
  // Stops every channel thread, waiting for each (at most about a join
  // timeout, for a peer stuck joining). Later calls refuse all work.
  void Shutdown();

 private:
  struct Peer {
    std::unique_ptr<KvChannelThread> thread = std::make_unique<KvChannelThread>();
    // False once the peer is stopped or forgotten: its outcomes are
    // dropped. Read and written on the I/O thread only.
    std::shared_ptr<bool> alive = std::make_shared<bool>(true);
  };

  // Runs `work` on the peer's thread; its outcome reaches `done` on the I/O
  // thread while the peer is alive. UNAVAILABLE (and no `done`) when the
  // thread takes no more work.
  absl::Status Submit(Peer& peer, std::function<absl::Status(KvChannelThread&)> work, Done done);
  // Destroys forgotten peers whose threads have ended.
  void Reap();

  KvCache* const cache_;
  const Post post_;
  const absl::Duration join_timeout_;
  const absl::Duration frame_timeout_;
  absl::flat_hash_map<const void*, Peer> peers_;
  // Forgotten peers' threads, until they end.
  std::vector<std::unique_ptr<KvChannelThread>> retired_;
  bool shut_down_ = false;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_NCCL_PEERS_H_
