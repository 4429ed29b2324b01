// The CUDA module's entry table (common/runtime/cuda_module.h): the only symbol
// libpdserve_cuda.so exports. Wires the NCCL peer channels into device KV
// memory when NCCL is built, so no caller outside the module names NCCL.
#include "common/base/status_macros.h"
#include "common/gpu/cuda/cuda_device.h"
#include "common/gpu/cuda/cuda_kv_memory.h"
#include "common/gpu/cuda/cuda_model_runner.h"
#include "common/runtime/cuda_module.h"
#if PDSERVE_HAVE_NCCL
#include "common/gpu/nccl/nccl_peer_channel.h"
#endif

namespace pdserve::cuda {
namespace {

absl::StatusOr<std::unique_ptr<ModelRunner>> CreateRunner(const ModelConfig& config,
                                                          const ModelWeights& weights, int ordinal,
                                                          bool cuda_graphs) {
  ASSIGN_OR_RETURN(std::unique_ptr<CudaModelRunner> runner,
                   CudaModelRunner::Create(config, weights, {ordinal, cuda_graphs}));
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

absl::StatusOr<std::unique_ptr<KvDeviceMemory>> AllocateKvMemory(int ordinal, size_t bytes) {
  PeerChannelMaker channels;
#if PDSERVE_HAVE_NCCL
  channels.new_id = nccl::NewNcclChannelId;
  channels.join = nccl::JoinNcclChannel;
#endif
  return AllocateKvDeviceMemory(ordinal, bytes, std::move(channels));
}

constexpr CudaModuleApi kApi = {
    .abi_version = kCudaModuleAbiVersion,
    .check_device = CheckDevice,
    .create_runner = CreateRunner,
    .allocate_kv_memory = AllocateKvMemory,
    .free_memory = FreeMemory,
};

}  // namespace
}  // namespace pdserve::cuda

extern "C" __attribute__((visibility("default"))) const pdserve::CudaModuleApi*
PdserveCudaModuleV1() {
  return &pdserve::cuda::kApi;
}
