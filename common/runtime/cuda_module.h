// The CUDA module: the CUDA model runner and device KV memory built as a
// shared object (libpdserve_cuda.so) that a worker loads only when a flag asks
// for a cuda device. Linking cuBLAS, cudart and NCCL into every binary costs a
// CPU-only worker ~150 MiB of resident memory at start (docs/PERFORMANCE.md
// "Memory") for code it never runs; loading on demand costs nothing there.
//
// The module resolves pdserve's own symbols (KvDeviceMemory, ValidateBatch,
// ...) from the executable that loads it, which exports them
// (pdserve_exports_for_cuda_module in CMakeLists.txt), so the two share one
// copy of every type and of glog/absl state. CPU-visible header: no CUDA types.
#ifndef PDSERVE_COMMON_RUNTIME_CUDA_MODULE_H_
#define PDSERVE_COMMON_RUNTIME_CUDA_MODULE_H_

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/engine/kv_cache.h"
#include "common/engine/model_runner.h"
#include "common/model/model_config.h"
#include "common/model/model_weights.h"

namespace pdserve {

// Bumped whenever CudaModuleApi or a type it passes changes shape, so a stale
// module next to a newer binary is refused instead of called.
inline constexpr int kCudaModuleAbiVersion = 2;

// What the module offers; every entry is thread-safe.
struct CudaModuleApi {
  int abi_version;
  // OK when device `ordinal` is there and starts (UNAVAILABLE otherwise).
  absl::Status (*check_device)(int ordinal);
  // The CUDA model runner; `weights` must outlive it.
  absl::StatusOr<std::unique_ptr<ModelRunner>> (*create_runner)(const ModelConfig& config,
                                                                const ModelWeights& weights,
                                                                int ordinal, bool cuda_graphs);
  // `bytes` of zeroed device memory for a KV pool, with CUDA IPC and (when
  // NCCL is built) NCCL peer channels.
  absl::StatusOr<std::unique_ptr<KvDeviceMemory>> (*allocate_kv_memory)(int ordinal, size_t bytes);
  // Bytes of device memory free now (cudaMemGetInfo), for sizing the KV
  // pool from --kv_memory_fraction once the weights are loaded.
  absl::StatusOr<size_t> (*free_memory)(int ordinal);
};

// The module's one exported symbol: extern "C" const CudaModuleApi* of no
// arguments (common/gpu/module_entry.cc).
inline constexpr char kCudaModuleEntryName[] = "PdserveCudaModuleV1";

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RUNTIME_CUDA_MODULE_H_
