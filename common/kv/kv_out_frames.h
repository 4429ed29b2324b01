// The frames a KV sender writes, built from a transfer target and source
// blocks: layer frames for each payload path (inline bytes, staged from a
// device cache when needed; CUDA IPC block ids; NCCL headers), the ATTACH
// that shares a device pool, and the argument checks every SendLayer makes.
// Pure functions of their arguments (the device staging copy aside).
#ifndef PDSERVE_COMMON_KV_KV_OUT_FRAMES_H_
#define PDSERVE_COMMON_KV_KV_OUT_FRAMES_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/engine/kv_cache.h"
#include "common/kv/kv_send_connection.h"
#include "common/kv/kv_transport.h"
#include "pdserve/v1/kv_frame.pb.h"

namespace pdserve {

// A header of `kind` for the target's transfer and epoch.
v1::KvFrameHeader HeaderFor(const KvTransferTarget& target, v1::KvFrameHeader::Kind kind);

// INVALID_ARGUMENT unless layer and block lists fit the cache.
absl::Status ValidateLayer(int layer, absl::Span<const int32_t> logical_blocks,
                           const KvCache& cache, absl::Span<const int32_t> src_block_ids);

// tcp: the blocks' bytes follow the header; a device cache's are gathered
// into a host buffer the frame owns.
absl::StatusOr<KvOutFrame> InlineLayerFrame(const v1::KvFrameHeader& header, KvCache& src_cache,
                                            absl::Span<const int32_t> src_block_ids);

// cuda_ipc: the sender's block ids instead of bytes.
KvOutFrame IpcLayerFrame(v1::KvFrameHeader header, absl::Span<const int32_t> src_block_ids);

// The ATTACH frame that shares `pool` with receivers; empty without a pool.
absl::StatusOr<std::string> AttachHead(const KvCache* pool);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_OUT_FRAMES_H_
