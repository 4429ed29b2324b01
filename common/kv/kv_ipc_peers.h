// KvIpcPeers: the decode side of the cuda_ipc KV path (common/kv/kv_path.h).
// Each connection's sender first ATTACHes its KV pool (a CUDA IPC handle);
// this maps it, and for every PAYLOAD_CUDA_IPC layer frame copies the named
// source blocks, device to device, into the receiver's reserved blocks
// (receiver pull: the sender never learns the receiver's block ids, and a
// frame's bytes are in place before the frame counts as written). Mappings
// are dropped when their connection closes.
//
// Not thread-safe: lives on the KV receiver's I/O thread.
#ifndef PDSERVE_COMMON_KV_KV_IPC_PEERS_H_
#define PDSERVE_COMMON_KV_KV_IPC_PEERS_H_

#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/engine/kv_cache.h"
#include "pdserve/v1/kv_frame.pb.h"

namespace pdserve {

class KvIpcPeers {
 public:
  explicit KvIpcPeers(KvCache* cache) : cache_(cache) {}

  // An ATTACH frame on connection `conn` (any stable key). FAILED_PRECONDITION
  // when this cache cannot take it (host memory, another node's handle),
  // INVALID_ARGUMENT for a pool description that does not fit the layout.
  absl::Status Attach(const void* conn, const v1::KvFrameHeader& header);
  // Copies a PAYLOAD_CUDA_IPC frame's blocks into `dst` (this cache's layer
  // blocks, one per entry of block_indices).
  absl::Status Pull(const void* conn, const v1::KvFrameHeader& header,
                    absl::Span<uint8_t* const> dst);
  void Forget(const void* conn) { peers_.erase(conn); }

 private:
  struct Peer {
    std::unique_ptr<KvPeerPool> pool;
    uint32_t pool_blocks = 0;
  };

  KvCache* const cache_;
  absl::flat_hash_map<const void*, Peer> peers_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_IPC_PEERS_H_
