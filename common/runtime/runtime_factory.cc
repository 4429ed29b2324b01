#include "common/runtime/runtime_factory.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/cpu/cpu_model_runner.h"
#include "common/runtime/kv_memory_budget.h"
#include "glog/logging.h"
#if PDSERVE_HAVE_CUDA
#include "common/runtime/cuda_module_loader.h"
#endif

namespace pdserve {

#if PDSERVE_HAVE_CUDA

bool CudaBuilt() { return true; }

// The CUDA implementations live in the CUDA module (common/runtime/cuda_module.h),
// loaded the first time a cuda device is asked for.
absl::Status CheckDeviceUsable(const DeviceSpec& device) {
  if (!device.is_cuda()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const CudaModuleApi* cuda, LoadCudaModule());
  return cuda->check_device(device.ordinal);
}

absl::StatusOr<std::unique_ptr<ModelRunner>> CreateModelRunner(const ModelConfig& config,
                                                               const ModelWeights* weights,
                                                               const RunnerOptions& options) {
  if (!options.device.is_cuda()) {
    return std::make_unique<CpuModelRunner>(config, weights, options.threads);
  }
  ASSIGN_OR_RETURN(const CudaModuleApi* cuda, LoadCudaModule());
  return cuda->create_runner(config, *weights, options.device.ordinal, options.cuda_graphs);
}

namespace {

// Bytes free now on cuda `device`, which --kv_memory_fraction sizes its
// pool from (EngineRuntimeFlags::Validate keeps the flag off cpu devices).
absl::StatusOr<size_t> CudaFreeMemory(const DeviceSpec& device) {
  ASSIGN_OR_RETURN(const CudaModuleApi* cuda, LoadCudaModule());
  return cuda->free_memory(device.ordinal);
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvCache>> CreateKvCache(const DeviceSpec& device,
                                                       const KvLayout& layout, int32_t num_blocks) {
  if (!device.is_cuda()) return KvCache::Create(layout, num_blocks);
  ASSIGN_OR_RETURN(const CudaModuleApi* cuda, LoadCudaModule());
  ASSIGN_OR_RETURN(
      std::unique_ptr<KvDeviceMemory> memory,
      cuda->allocate_kv_memory(device.ordinal, KvCache::PoolBytes(layout, num_blocks)));
  return KvCache::Create(layout, num_blocks, std::move(memory));
}

#else  // !PDSERVE_HAVE_CUDA

bool CudaBuilt() { return false; }

absl::Status CheckDeviceUsable(const DeviceSpec& device) {
  if (!device.is_cuda()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("device ", device.ToString(),
                   ": this build has no CUDA support (rebuild with nvcc on PATH "
                   "or -DPDSERVE_CUDA=ON)"));
}

absl::StatusOr<std::unique_ptr<ModelRunner>> CreateModelRunner(const ModelConfig& config,
                                                               const ModelWeights* weights,
                                                               const RunnerOptions& options) {
  RETURN_IF_ERROR(CheckDeviceUsable(options.device));
  return std::make_unique<CpuModelRunner>(config, weights, options.threads);
}

namespace {

// Never reached: a build without CUDA refuses cuda devices in
// CreateModelRunner, before the pool is sized.
absl::StatusOr<size_t> CudaFreeMemory(const DeviceSpec& device) {
  return absl::FailedPreconditionError(
      absl::StrCat("device ", device.ToString(), ": this build has no CUDA support"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvCache>> CreateKvCache(const DeviceSpec& device,
                                                       const KvLayout& layout, int32_t num_blocks) {
  RETURN_IF_ERROR(CheckDeviceUsable(device));
  return KvCache::Create(layout, num_blocks);
}

#endif  // PDSERVE_HAVE_CUDA

absl::Status EngineRuntimeFlags::Validate() const {
  if (threads < 1 || threads > 256) return absl::InvalidArgumentError("--threads out of range");
  const absl::StatusOr<DeviceSpec> spec = DeviceSpec::Parse(device);
  if (!spec.ok())
    return absl::InvalidArgumentError(absl::StrCat("--device: ", spec.status().message()));
  if (kv_blocks < 1) return absl::InvalidArgumentError("--kv_blocks must be positive");
  if (kv_memory_fraction != 0) {
    RETURN_IF_ERROR(ValidateKvMemoryFraction(kv_memory_fraction));
    if (!spec->is_cuda()) {
      return absl::InvalidArgumentError(
          "--kv_memory_fraction sizes a cuda device's KV pool; size a cpu pool with --kv_blocks");
    }
  }
  if (block_size < 1 || block_size > 1024) {
    return absl::InvalidArgumentError("--block_size out of range");
  }
  if (absl::Status st = ValidateKvDtype(kv_dtype); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--kv_dtype: ", st.message()));
  }
  // Refused here, at start-up, rather than by the CUDA runner on every
  // request's first step.
  if (spec->is_cuda() && kv_dtype == kKvDtypeInt8) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv_dtype=int8 runs on the CPU only; use f16 with --device=", device));
  }
  return absl::OkStatus();
}

absl::StatusOr<EngineRuntime> CreateEngineRuntime(const Model& model,
                                                  const EngineRuntimeFlags& flags) {
  RETURN_IF_ERROR(flags.Validate());
  ASSIGN_OR_RETURN(const DeviceSpec device, DeviceSpec::Parse(flags.device));
  const KvLayout layout = KvLayout::ForModel(model.config(), flags.block_size, flags.kv_dtype);
  EngineRuntime rt;
  // The runner first: its weights are on the device before the pool is
  // sized from what is left.
  ASSIGN_OR_RETURN(rt.runner, CreateModelRunner(model.config(), &model.weights(),
                                                {.device = device,
                                                 .threads = flags.threads,
                                                 .cuda_graphs = flags.cuda_graphs}));
  int32_t blocks = flags.kv_blocks;
  if (flags.kv_memory_fraction > 0) {
    ASSIGN_OR_RETURN(const size_t free_bytes, CudaFreeMemory(device));
    ASSIGN_OR_RETURN(blocks, KvBlocksForMemory(layout, flags.kv_memory_fraction, free_bytes));
    LOG(INFO) << "KV pool: " << blocks << " blocks of " << flags.block_size << " tokens ("
              << (KvCache::PoolBytes(layout, blocks) >> 20) << " MiB) = "
              << flags.kv_memory_fraction << " of " << (free_bytes >> 20) << " MiB free on "
              << device.ToString();
  }
  ASSIGN_OR_RETURN(rt.cache, CreateKvCache(device, layout, blocks));
  return rt;
}

}  // namespace pdserve
