// Device memory for a KvCache pool on one CUDA device. CPU-visible header:
// the runtime factory calls it; nothing here names a CUDA type.
#ifndef PDSERVE_COMMON_GPU_CUDA_CUDA_KV_MEMORY_H_
#define PDSERVE_COMMON_GPU_CUDA_CUDA_KV_MEMORY_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/engine/kv_cache.h"

namespace pdserve::cuda {

// How the memory opens NCCL peer channels (common/gpu/nccl/, wired in by the
// runtime factory when NCCL is built); empty functions = no channels.
struct PeerChannelMaker {
  std::function<absl::StatusOr<std::string>()> new_id;
  std::function<absl::StatusOr<std::unique_ptr<KvPeerChannel>>(
      int device, const std::string& id, int rank, absl::Time deadline,
      const std::atomic<bool>* interrupted)>
      join;
};

// `bytes` of zeroed device memory on `device`. RESOURCE_EXHAUSTED when the
// device has no room, UNAVAILABLE when the device is not there.
absl::StatusOr<std::unique_ptr<KvDeviceMemory>> AllocateKvDeviceMemory(
    int device, size_t bytes, PeerChannelMaker channels = {});

}  // namespace pdserve::cuda

#endif  // PDSERVE_COMMON_GPU_CUDA_CUDA_KV_MEMORY_H_
