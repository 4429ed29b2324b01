#include "common/runtime_factory.h"

#include "absl/strings/str_cat.h"
#include "common/cpu_model_runner.h"
#include "common/status_macros.h"
#if PDSERVE_HAVE_CUDA
#include "common/cuda/cuda_device.h"
#include "common/cuda/cuda_kv_memory.h"
#include "common/cuda/cuda_model_runner.h"
#endif
#if PDSERVE_HAVE_NCCL
#include "common/nccl/nccl_peer_channel.h"
#endif

namespace pdserve {

#if PDSERVE_HAVE_CUDA

bool CudaBuilt() { return true; }

absl::Status CheckDeviceUsable(const DeviceSpec& device) {
  return device.is_cuda() ? cuda::CheckDevice(device.ordinal) : absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ModelRunner>> CreateModelRunner(const ModelConfig& config,
                                                               const ModelWeights* weights,
                                                               const RunnerOptions& options) {
  if (!options.device.is_cuda()) {
    return std::make_unique<CpuModelRunner>(config, weights, options.threads);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaModelRunner> runner,
                   cuda::CudaModelRunner::Create(
                       config, *weights, {options.device.ordinal, options.cuda_graphs}));
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

absl::StatusOr<std::unique_ptr<KvCache>> CreateKvCache(const DeviceSpec& device,
                                                       const KvLayout& layout,
                                                       int32_t num_blocks) {
  if (!device.is_cuda()) return KvCache::Create(layout, num_blocks);
  cuda::PeerChannelMaker channels;
#if PDSERVE_HAVE_NCCL
  channels.new_id = nccl::NewNcclChannelId;
  channels.join = nccl::JoinNcclChannel;
#endif
  ASSIGN_OR_RETURN(std::unique_ptr<KvDeviceMemory> memory,
                   cuda::AllocateKvDeviceMemory(device.ordinal,
                                                KvCache::PoolBytes(layout, num_blocks),
                                                std::move(channels)));
  return KvCache::Create(layout, num_blocks, std::move(memory));
}

#else  // !PDSERVE_HAVE_CUDA

bool CudaBuilt() { return false; }

absl::Status CheckDeviceUsable(const DeviceSpec& device) {
  if (!device.is_cuda()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "device ", device.ToString(), ": this build has no CUDA support (rebuild with nvcc on PATH "
      "or -DPDSERVE_CUDA=ON)"));
}

absl::StatusOr<std::unique_ptr<ModelRunner>> CreateModelRunner(const ModelConfig& config,
                                                               const ModelWeights* weights,
                                                               const RunnerOptions& options) {
  RETURN_IF_ERROR(CheckDeviceUsable(options.device));
  return std::make_unique<CpuModelRunner>(config, weights, options.threads);
}

absl::StatusOr<std::unique_ptr<KvCache>> CreateKvCache(const DeviceSpec& device,
                                                       const KvLayout& layout,
                                                       int32_t num_blocks) {
  RETURN_IF_ERROR(CheckDeviceUsable(device));
  return KvCache::Create(layout, num_blocks);
}

#endif  // PDSERVE_HAVE_CUDA

absl::StatusOr<EngineRuntime> CreateEngineRuntime(const ModelConfig& config,
                                                  const ModelWeights* weights,
                                                  const KvLayout& layout, int32_t kv_blocks,
                                                  const RunnerOptions& options) {
  EngineRuntime rt;
  ASSIGN_OR_RETURN(rt.cache, CreateKvCache(options.device, layout, kv_blocks));
  ASSIGN_OR_RETURN(rt.runner, CreateModelRunner(config, weights, options));
  return rt;
}

}  // namespace pdserve
