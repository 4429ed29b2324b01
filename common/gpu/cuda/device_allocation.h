// How much device memory lies behind a pointer, asked of the driver. The
// CUDA IPC path uses it to check a peer's claimed pool size against the
// mapping it actually got, so a lying peer cannot steer copies past the end.
#ifndef PDSERVE_COMMON_GPU_CUDA_DEVICE_ALLOCATION_H_
#define PDSERVE_COMMON_GPU_CUDA_DEVICE_ALLOCATION_H_

#include <cstddef>

#include "absl/status/statusor.h"

namespace pdserve::cuda {

// Bytes from `p` to the end of the device allocation (or IPC mapping) that
// holds it. INVALID_ARGUMENT when `p` is not device memory; UNAVAILABLE when
// the driver does not offer the query.
absl::StatusOr<size_t> BytesToAllocationEnd(const void* p);

}  // namespace pdserve::cuda

#endif  // PDSERVE_COMMON_GPU_CUDA_DEVICE_ALLOCATION_H_
