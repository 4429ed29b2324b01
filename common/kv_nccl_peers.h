// KvNcclPeers: the decode side of the nccl KV path (common/kv_path.h). Each
// nccl connection's sender first sends NCCL_HELLO with a channel id; this
// joins the channel as rank 1, and for every PAYLOAD_NCCL layer frame
// receives the frame's bytes from it, in frame order, into the reserved
// blocks (or into nothing, for a frame of a dead epoch: the bytes must
// still be taken off the channel to keep both ends in step), waiting until
// they are in place. Channels end with their connection.
//
// Joining and each receive block the calling thread (the receiver's I/O
// thread), bounded by the timeouts given here: one-time per pair and the
// length of one frame's transfer, respectively.
// Not thread-safe: lives on the KV receiver's I/O thread.
#ifndef PDSERVE_COMMON_KV_NCCL_PEERS_H_
#define PDSERVE_COMMON_KV_NCCL_PEERS_H_

#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/kv_cache.h"
#include "pdserve/v1/kv_frame.pb.h"

namespace pdserve {

class KvNcclPeers {
 public:
  KvNcclPeers(KvCache* cache, absl::Duration join_timeout, absl::Duration frame_timeout)
      : cache_(cache), join_timeout_(join_timeout), frame_timeout_(frame_timeout) {}

  // An NCCL_HELLO on connection `conn`. FAILED_PRECONDITION when this cache
  // cannot open NCCL channels; the join's error otherwise.
  absl::Status Hello(const void* conn, const v1::KvFrameHeader& header);
  // A PAYLOAD_NCCL frame's blocks into `dst` (one per entry of
  // block_indices; null = receive and drop). After an error the channel is
  // dead: close the connection.
  absl::Status Receive(const void* conn, const v1::KvFrameHeader& header,
                       absl::Span<uint8_t* const> dst);
  void Forget(const void* conn) { channels_.erase(conn); }

 private:
  KvCache* const cache_;
  const absl::Duration join_timeout_;
  const absl::Duration frame_timeout_;
  absl::flat_hash_map<const void*, std::unique_ptr<KvPeerChannel>> channels_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_NCCL_PEERS_H_
