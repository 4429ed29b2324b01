// Finds the CUDA module (common/runtime/cuda_module.h): linked into this binary (the
// GPU tests link it in), else libpdserve_cuda.so from $PDSERVE_CUDA_MODULE or
// next to the running executable. Loaded once per process, on first use.
#ifndef PDSERVE_COMMON_RUNTIME_CUDA_MODULE_LOADER_H_
#define PDSERVE_COMMON_RUNTIME_CUDA_MODULE_LOADER_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/runtime/cuda_module.h"

namespace pdserve {

// The module file name the loader looks for next to the executable.
inline constexpr char kCudaModuleFileName[] = "libpdserve_cuda.so";

// The module's entry table, or FAILED_PRECONDITION saying which file was
// tried and why it did not load (missing, unresolved symbol, stale ABI). The
// answer, good or bad, is kept: a process loads the module at most once.
absl::StatusOr<const CudaModuleApi*> LoadCudaModule();

// Where LoadCudaModule looks when the module is not linked in: the
// environment's $PDSERVE_CUDA_MODULE when set, else the executable's folder.
std::string CudaModulePath();

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RUNTIME_CUDA_MODULE_LOADER_H_
