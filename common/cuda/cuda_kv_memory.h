// Device memory for a KvCache pool on one CUDA device. CPU-visible header:
// the runtime factory calls it; nothing here names a CUDA type.
#ifndef PDSERVE_COMMON_CUDA_CUDA_KV_MEMORY_H_
#define PDSERVE_COMMON_CUDA_CUDA_KV_MEMORY_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "common/kv_cache.h"

namespace pdserve::cuda {

// `bytes` of zeroed device memory on `device`. RESOURCE_EXHAUSTED when the
// device has no room, UNAVAILABLE when the device is not there.
absl::StatusOr<std::unique_ptr<KvDeviceMemory>> AllocateKvDeviceMemory(int device, size_t bytes);

}  // namespace pdserve::cuda

#endif  // PDSERVE_COMMON_CUDA_CUDA_KV_MEMORY_H_
