// The one place that chooses implementations by device (docs/ARCHITECTURE.md): the
// model runner and the KV cache pool of a worker. Callers include no device
// headers; a build without CUDA answers cuda devices with FAILED_PRECONDITION.
// With CUDA, the cuda implementations come from the CUDA module
// (common/runtime/cuda_module.h), loaded the first time a cuda device is asked for.
#ifndef PDSERVE_COMMON_RUNTIME_RUNTIME_FACTORY_H_
#define PDSERVE_COMMON_RUNTIME_RUNTIME_FACTORY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/engine/kv_cache.h"
#include "common/engine/model_runner.h"
#include "common/model/model.h"
#include "common/model/model_weights.h"
#include "common/runtime/device_spec.h"

namespace pdserve {

struct RunnerOptions {
  DeviceSpec device;
  int threads = 2;           // CPU runner: matmul/attention threads
  bool cuda_graphs = false;  // CUDA runner: replay decode steps from CUDA graphs
};

// True when this binary was built with CUDA support.
bool CudaBuilt();

// OK when `device` can be used here: always for cpu; for cuda, when CUDA is
// built in and the device is visible (UNAVAILABLE / FAILED_PRECONDITION).
absl::Status CheckDeviceUsable(const DeviceSpec& device);

// The weights must outlive the runner.
absl::StatusOr<std::unique_ptr<ModelRunner>> CreateModelRunner(const ModelConfig& config,
                                                               const ModelWeights* weights,
                                                               const RunnerOptions& options);

// A KV pool in the device's memory (host memory for cpu).
absl::StatusOr<std::unique_ptr<KvCache>> CreateKvCache(const DeviceSpec& device,
                                                       const KvLayout& layout, int32_t num_blocks);

// What an engine runs on: a KV pool and a model runner on one device.
struct EngineRuntime {
  std::unique_ptr<KvCache> cache;
  std::unique_ptr<ModelRunner> runner;
};
// The runtime as a worker's (or `pdserve run`'s) flags describe it.
struct EngineRuntimeFlags {
  std::string device = "cpu";  // as --device spells it (common/runtime/device_spec.h)
  int threads = 2;
  bool cuda_graphs = false;
  int32_t kv_blocks = 1024;
  // > 0 (cuda devices only): the KV pool takes this share of the device
  // memory free once the weights are loaded, in place of kv_blocks.
  double kv_memory_fraction = 0;
  int32_t block_size = 16;
  std::string kv_dtype = "f16";

  // INVALID_ARGUMENT naming the flag that is out of range.
  absl::Status Validate() const;
};
// `model` must outlive the runtime (the runner reads its weights).
absl::StatusOr<EngineRuntime> CreateEngineRuntime(const Model& model,
                                                  const EngineRuntimeFlags& flags);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RUNTIME_RUNTIME_FACTORY_H_
