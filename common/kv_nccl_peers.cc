#include "common/kv_nccl_peers.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pdserve {

absl::Status KvNcclPeers::Hello(const void* conn, const v1::KvFrameHeader& header) {
  if (!cache_->on_device() || !cache_->device_memory()->SupportsPeerChannels()) {
    return absl::FailedPreconditionError(
        "kv hello: this decode worker cannot receive over NCCL (its KV cache is not on a GPU, or "
        "it was built without NCCL)");
  }
  absl::StatusOr<std::unique_ptr<KvPeerChannel>> channel = cache_->device_memory()->JoinPeerChannel(
      header.nccl_id(), /*rank=*/1, absl::Now() + join_timeout_);
  if (!channel.ok()) {
    return absl::Status(channel.status().code(),
                        absl::StrCat("kv hello: joining the NCCL channel: ",
                                     channel.status().message()));
  }
  channels_[conn] = std::move(*channel);
  return absl::OkStatus();
}

absl::Status KvNcclPeers::Receive(const void* conn, const v1::KvFrameHeader& header,
                                  absl::Span<uint8_t* const> dst) {
  auto it = channels_.find(conn);
  if (it == channels_.end()) {
    return absl::FailedPreconditionError("kv frame: an nccl layer before any NCCL_HELLO");
  }
  if (dst.size() != static_cast<size_t>(header.block_indices_size())) {
    return absl::InternalError("kv frame: destination count differs from the frame's blocks");
  }
  const size_t bpb = static_cast<size_t>(cache_->layout().bytes_per_layer_block());
  KvPeerChannel& channel = *it->second;
  RETURN_IF_ERROR(channel.RecvBlocks(dst, bpb));
  if (absl::Status st = channel.Wait(absl::Now() + frame_timeout_); !st.ok()) {
    return absl::DataLossError(
        absl::StrCat("kv frame: the NCCL transfer did not complete: ", st.message()));
  }
  return absl::OkStatus();
}

}  // namespace pdserve
