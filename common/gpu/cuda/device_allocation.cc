#include "common/gpu/cuda/device_allocation.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/gpu/cuda/cuda_status.h"

namespace pdserve::cuda {
namespace {

// The runtime has no size query, and we link only the static runtime, not
// libcuda; the runtime hands out the driver's entry point instead.
absl::StatusOr<PFN_cuMemGetAddressRange_v3020> AddressRangeQuery() {
  static void* fn = nullptr;
  static const cudaError_t err = [] {
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 3020,
                                                     cudaEnableDefault, &found);
    if (e == cudaSuccess && found != cudaDriverEntryPointSuccess) e = cudaErrorNotSupported;
    return e;
  }();
  if (err != cudaSuccess || fn == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cuda: cuMemGetAddressRange unavailable: ", cudaGetErrorString(err)));
  }
  return reinterpret_cast<PFN_cuMemGetAddressRange_v3020>(fn);
}

}  // namespace

absl::StatusOr<size_t> BytesToAllocationEnd(const void* p) {
  absl::StatusOr<PFN_cuMemGetAddressRange_v3020> query = AddressRangeQuery();
  if (!query.ok()) return query.status();
  CUdeviceptr base = 0;
  size_t size = 0;
  const CUdeviceptr ptr = reinterpret_cast<uintptr_t>(p);
  if (CUresult r = (*query)(&base, &size, ptr); r != CUDA_SUCCESS) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda: cuMemGetAddressRange failed (CUresult ", static_cast<int>(r), ")"));
  }
  return static_cast<size_t>(base + size - ptr);
}

}  // namespace pdserve::cuda
