#include "common/gpu/cuda/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace pdserve::cuda {

bool IsStickyCudaError(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorAssert:  // a device-side assert
    case cudaErrorLaunchTimeout:
    case cudaErrorContextIsDestroyed:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoDevice:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string msg =
      absl::StrCat("cuda: ", what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(msg);
  if (err == cudaErrorNoDevice || err == cudaErrorInvalidDevice ||
      err == cudaErrorDevicesUnavailable || err == cudaErrorInsufficientDriver) {
    return absl::UnavailableError(msg);
  }
  if (IsStickyCudaError(err)) return absl::InternalError(msg);
  return absl::FailedPreconditionError(msg);
}

absl::StatusOr<bool> QueryDone(cudaError_t query_result, const char* what) {
  if (query_result == cudaSuccess) return true;
  if (query_result != cudaErrorNotReady) return CudaStatus(query_result, what);
  if (cudaPeekAtLastError() == cudaErrorNotReady) cudaGetLastError();
  return false;
}

absl::Status CublasStatus(cublasStatus_t err, const char* what) {
  if (err == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string msg = absl::StrCat("cublas: ", what, ": ", cublasGetStatusName(err), " (",
                                       cublasGetStatusString(err), ")");
  switch (err) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(msg);
    // A call this handle cannot make (shape, type, GPU): the call fails, the
    // context and the runner are fine.
    case CUBLAS_STATUS_INVALID_VALUE:
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return absl::FailedPreconditionError(msg);
    // Execution and internal failures may leave the context poisoned: the
    // runner keeps them (sticky) and the worker reports itself unhealthy.
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace pdserve::cuda
