// Turns CUDA runtime and cuBLAS error codes into absl::Status, so every
// device failure travels the same way as any other error.
// Internal to common/gpu/cuda/: it includes CUDA headers, which code outside
// this directory must not see.
#ifndef PDSERVE_COMMON_GPU_CUDA_CUDA_STATUS_H_
#define PDSERVE_COMMON_GPU_CUDA_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pdserve::cuda {

// OK for cudaSuccess. Errors that leave the context unusable (a fault in a
// kernel, a lost device) are INTERNAL/UNAVAILABLE; out of memory is
// RESOURCE_EXHAUSTED. `what` names the call for the message.
absl::Status CudaStatus(cudaError_t err, const char* what);
absl::Status CublasStatus(cublasStatus_t err, const char* what);

// True for errors after which the CUDA context cannot be used again.
bool IsStickyCudaError(cudaError_t err);

// The outcome of cudaStreamQuery/cudaEventQuery: true when the work is done,
// false while it runs. "Not ready" is not an error, but the runtime records
// it as the thread's last error, where the next cudaGetLastError() check
// (after a kernel launch) would report it; this clears it.
absl::StatusOr<bool> QueryDone(cudaError_t query_result, const char* what);

}  // namespace pdserve::cuda

#define PDSERVE_CUDA_RETURN_IF_ERROR(expr)                                        \
  do {                                                                            \
    if (absl::Status _st = ::pdserve::cuda::CudaStatus((expr), #expr); !_st.ok()) \
      return _st;                                                                 \
  } while (0)

#define PDSERVE_CUBLAS_RETURN_IF_ERROR(expr)                                        \
  do {                                                                              \
    if (absl::Status _st = ::pdserve::cuda::CublasStatus((expr), #expr); !_st.ok()) \
      return _st;                                                                   \
  } while (0)

#endif  // PDSERVE_COMMON_GPU_CUDA_CUDA_STATUS_H_
