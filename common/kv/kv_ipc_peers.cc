#include "common/kv/kv_ipc_peers.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace pdserve {

absl::Status KvIpcPeers::Attach(const void* conn, const v1::KvFrameHeader& header) {
  if (!cache_->on_device()) {
    return absl::FailedPreconditionError(
        "kv attach: this decode worker's KV cache is in host memory; cuda_ipc needs "
        "--device=cuda on both tiers");
  }
  const KvLayout& l = cache_->layout();
  const uint64_t need = static_cast<uint64_t>(header.pool_blocks()) * l.n_layers *
                        static_cast<uint64_t>(l.bytes_per_layer_block());
  if (header.pool_blocks() == 0 || header.pool_bytes() < need) {
    return absl::InvalidArgumentError(absl::StrCat("kv attach: a pool of ", header.pool_bytes(),
                                                   " bytes cannot hold ", header.pool_blocks(),
                                                   " blocks of ", l.DebugString()));
  }
  absl::StatusOr<std::unique_ptr<KvPeerPool>> pool =
      cache_->device_memory()->OpenPeer(header.ipc_handle(), header.pool_bytes());
  if (!pool.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("kv attach: cannot map the prefill worker's KV pool (cuda_ipc needs both "
                     "workers on one node, with peer access between their GPUs): ",
                     pool.status().message()));
  }
  peers_[conn] = Peer{std::move(*pool), header.pool_blocks()};
  return absl::OkStatus();
}

absl::Status KvIpcPeers::Pull(const void* conn, const v1::KvFrameHeader& header,
                              absl::Span<uint8_t* const> dst) {
  auto it = peers_.find(conn);
  if (it == peers_.end()) {
    return absl::FailedPreconditionError("kv frame: a cuda_ipc layer before any ATTACH");
  }
  const Peer& peer = it->second;
  if (header.src_blocks_size() != header.block_indices_size() ||
      dst.size() != static_cast<size_t>(header.src_blocks_size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv frame: ", header.src_blocks_size(), " source blocks for ",
                     header.block_indices_size(), " blocks"));
  }
  const int64_t bpb = cache_->layout().bytes_per_layer_block();
  std::vector<const uint8_t*> src;
  src.reserve(dst.size());
  for (uint32_t b : header.src_blocks()) {
    if (b >= peer.pool_blocks) {
      return absl::InvalidArgumentError(absl::StrCat("kv frame: source block ", b,
                                                     " outside the attached pool of ",
                                                     peer.pool_blocks));
    }
    const uint64_t offset =
        (static_cast<uint64_t>(header.layer()) * peer.pool_blocks + b) * static_cast<uint64_t>(bpb);
    src.push_back(peer.pool->data() + offset);
  }
  RETURN_IF_ERROR(cache_->device_memory()->CopyBlocks(src, dst, static_cast<size_t>(bpb)));
  return absl::OkStatus();
}

}  // namespace pdserve
