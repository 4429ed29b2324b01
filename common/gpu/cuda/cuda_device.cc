#include "common/gpu/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "common/gpu/cuda/cuda_status.h"

namespace pdserve::cuda {

absl::StatusOr<int> CountDevices() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear it: "no device" is an answer, not a failure
    return absl::UnavailableError(absl::StrCat("no usable CUDA device: ", cudaGetErrorName(err),
                                               " (", cudaGetErrorString(err), ")"));
  }
  return n;
}

int DeviceCount() { return CountDevices().value_or(0); }

absl::Status CheckDevice(int ordinal) {
  const int n = DeviceCount();
  if (ordinal < 0 || ordinal >= n) {
    return absl::UnavailableError(
        absl::StrCat("cuda: device ", ordinal, " not available (", n, " visible)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> FreeMemory(int ordinal) {
  if (absl::Status st = CheckDevice(ordinal); !st.ok()) return st;
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  size_t free_bytes = 0, total_bytes = 0;
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

absl::StatusOr<std::string> DeviceDescription(int ordinal) {
  if (absl::Status st = CheckDevice(ordinal); !st.ok()) return st;
  cudaDeviceProp prop{};
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, ordinal));
  return absl::StrCat(prop.name, " (sm_", prop.major, prop.minor, ", ",
                      prop.totalGlobalMem >> 30, " GiB)");
}

}  // namespace pdserve::cuda
