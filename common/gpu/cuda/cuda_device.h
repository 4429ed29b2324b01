// What the CUDA runtime can see, for callers that include no CUDA headers
// (the runtime factory, GPU tests deciding whether to skip, worker health).
#ifndef PDSERVE_COMMON_GPU_CUDA_CUDA_DEVICE_H_
#define PDSERVE_COMMON_GPU_CUDA_CUDA_DEVICE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pdserve::cuda {

// Devices visible to this process; 0 when there is no driver or no GPU.
int DeviceCount();
// The same, or UNAVAILABLE with the runtime's reason (no driver, a driver
// older than the runtime, no /dev/nvidia*), for callers that must say why.
absl::StatusOr<int> CountDevices();

// OK when `ordinal` names a visible device; UNAVAILABLE otherwise.
absl::Status CheckDevice(int ordinal);

// Bytes free on device `ordinal` now (cudaMemGetInfo).
absl::StatusOr<size_t> FreeMemory(int ordinal);

// "NVIDIA H200 (sm_90, 139 GiB)" style, for logs and benchmark reports.
absl::StatusOr<std::string> DeviceDescription(int ordinal);

}  // namespace pdserve::cuda

#endif  // PDSERVE_COMMON_GPU_CUDA_CUDA_DEVICE_H_
