// A broken CUDA module for cuda_module_test: built twice, as a module whose
// entry table has the wrong ABI version (FAKE_CUDA_MODULE_STALE) and as a
// shared object with no entry at all. The loader must refuse both with a
// clear status instead of calling into them.
#include "common/runtime/cuda_module.h"

#ifdef FAKE_CUDA_MODULE_STALE
namespace {
constexpr pdserve::CudaModuleApi kStale = {.abi_version = pdserve::kCudaModuleAbiVersion + 1};
}  // namespace

extern "C" __attribute__((visibility("default"))) const pdserve::CudaModuleApi*
PdserveCudaModuleV1() {
  return &kStale;
}
#else
extern "C" __attribute__((visibility("default"))) int NotAPdserveModule() { return 0; }
#endif
