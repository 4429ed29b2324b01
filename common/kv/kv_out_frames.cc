#include "common/kv/kv_out_frames.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/kv/kv_frame.h"

namespace pdserve {
namespace {

// Sockets need host memory: a device cache's blocks are gathered into a
// buffer the frame owns, and the payload is pointed at it.
absl::Status StageFromDevice(const KvCache& cache, KvOutFrame& frame) {
  if (frame.payload.empty()) return absl::OkStatus();
  const size_t block_bytes = frame.payload.front().size();
  std::vector<const uint8_t*> blocks;
  blocks.reserve(frame.payload.size());
  for (const auto& b : frame.payload) blocks.push_back(static_cast<const uint8_t*>(b.data()));
  auto staged = std::make_shared<std::vector<uint8_t>>(blocks.size() * block_bytes);
  const absl::Status st =
      cache.device_memory()->GatherToHost(blocks, block_bytes, staged->data());
  if (!st.ok()) return absl::Status(st.code(), absl::StrCat("kv send: device copy: ", st.message()));
  for (size_t i = 0; i < frame.payload.size(); ++i) {
    frame.payload[i] = boost::asio::const_buffer(staged->data() + i * block_bytes, block_bytes);
  }
  frame.staged = std::move(staged);
  return absl::OkStatus();
}

}  // namespace

// The frame of a tcp layer: the blocks' bytes follow the header.
absl::StatusOr<KvOutFrame> InlineLayerFrame(const v1::KvFrameHeader& header, KvCache& src_cache,
                                            absl::Span<const int32_t> src_block_ids) {
  const size_t block_bytes = static_cast<size_t>(src_cache.layout().bytes_per_layer_block());
  KvOutFrame frame;
  for (int32_t b : src_block_ids) {
    frame.payload.emplace_back(src_cache.LayerBlock(header.layer(), b), block_bytes);
  }
  if (src_cache.on_device()) RETURN_IF_ERROR(StageFromDevice(src_cache, frame));
  frame.head = EncodeKvMessage(header);
  return frame;
}

// The ATTACH frame that shares `pool` with receivers; empty without a pool.
absl::StatusOr<std::string> AttachHead(const KvCache* pool) {
  if (pool == nullptr) return std::string();
  if (!pool->on_device()) {
    return absl::FailedPreconditionError("kv sender: a cuda_ipc pool must be in device memory");
  }
  v1::KvFrameHeader header;
  header.set_kind(v1::KvFrameHeader::ATTACH);
  ASSIGN_OR_RETURN(std::string handle, pool->device_memory()->ExportHandle());
  header.set_ipc_handle(std::move(handle));
  header.set_pool_bytes(KvCache::PoolBytes(pool->layout(), pool->num_ids()));
  header.set_pool_blocks(static_cast<uint32_t>(pool->num_ids()));
  return EncodeKvMessage(header);
}

absl::Status ValidateLayer(int layer, absl::Span<const int32_t> logical_blocks,
                           const KvCache& cache, absl::Span<const int32_t> src_block_ids) {
  if (layer < 0 || layer >= cache.layout().n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv send: layer ", layer, " not in [0, ", cache.layout().n_layers, ")"));
  }
  if (logical_blocks.empty() || logical_blocks.size() != src_block_ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat("kv send: ", logical_blocks.size(),
                                                   " logical blocks for ", src_block_ids.size(),
                                                   " source blocks"));
  }
  for (size_t i = 0; i < logical_blocks.size(); ++i) {
    if (logical_blocks[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("kv send: negative logical block ", logical_blocks[i]));
    }
    if (src_block_ids[i] < 0 || src_block_ids[i] >= cache.num_ids()) {
      return absl::InvalidArgumentError(absl::StrCat("kv send: source block ", src_block_ids[i],
                                                     " not in [0, ", cache.num_ids(), ")"));
    }
  }
  return absl::OkStatus();
}

v1::KvFrameHeader HeaderFor(const KvTransferTarget& target, v1::KvFrameHeader::Kind kind) {
  v1::KvFrameHeader header;
  header.set_transfer_id(target.transfer_id);
  header.set_epoch(target.epoch);
  header.set_kind(kind);
  return header;
}

KvOutFrame IpcLayerFrame(v1::KvFrameHeader header, absl::Span<const int32_t> src_block_ids) {
  header.set_payload_path(v1::KvFrameHeader::PAYLOAD_CUDA_IPC);
  for (int32_t b : src_block_ids) header.add_src_blocks(static_cast<uint32_t>(b));
  KvOutFrame frame;
  frame.head = EncodeKvMessage(header);
  return frame;
}

}  // namespace pdserve
