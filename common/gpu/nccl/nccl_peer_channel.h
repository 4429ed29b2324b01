// NcclPeerChannel: a KvPeerChannel (common/engine/kv_cache.h) over a two-rank
// NcclCommunicator on one device, for the nccl KV path between a prefill
// and a decode worker. It owns a stream and a fixed staging buffer
// (kStagingBytes): SendBlocks gathers blocks into staging and ncclSends them
// run by run; RecvBlocks receives run by run and scatters (null blocks:
// received, dropped). Both ends cut runs the same way (kv_staging_plan.h),
// so the sizes match without travelling. Block addresses go to the kernels
// as arguments: nothing on the host must outlive a call.
//
// Internal to common/gpu/nccl/. Thread-compatible.
#ifndef PDSERVE_COMMON_GPU_NCCL_NCCL_PEER_CHANNEL_H_
#define PDSERVE_COMMON_GPU_NCCL_NCCL_PEER_CHANNEL_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/engine/kv_cache.h"

namespace pdserve::nccl {

// Staging per channel and end: one run of at most this many bytes.
inline constexpr size_t kChannelStagingBytes = size_t{8} << 20;

absl::StatusOr<std::string> NewNcclChannelId();

// Joins as `rank` (0 = sender, 1 = receiver) on `device`; returns when both
// ranks joined, DEADLINE_EXCEEDED, or CANCELLED once *interrupted is set.
absl::StatusOr<std::unique_ptr<KvPeerChannel>> JoinNcclChannel(
    int device, const std::string& id, int rank, absl::Time deadline,
    const std::atomic<bool>* interrupted);

}  // namespace pdserve::nccl

#endif  // PDSERVE_COMMON_GPU_NCCL_NCCL_PEER_CHANNEL_H_
