#include "common/gpu/cuda/device_stager.h"

#include <cstring>

#include "common/base/status_macros.h"
#include "common/gpu/cuda/block_copy_kernels.h"
#include "common/kv/kv_staging_plan.h"

namespace pdserve::cuda {

DeviceStager::~DeviceStager() {
  absl::MutexLock lock(&mu_);
  if (stream_ != nullptr) {
    cudaSetDevice(device_);
    cudaStreamDestroy(stream_);
  }
}

absl::Status DeviceStager::Init() {
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  if (stream_ != nullptr) return absl::OkStatus();
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  RETURN_IF_ERROR(staging_.Reserve(kStagingBytes));
  return absl::OkStatus();
}

absl::StatusOr<void* const*> DeviceStager::UploadPointers(const void* const* ptrs, size_t n) {
  const size_t bytes = n * sizeof(void*);
  RETURN_IF_ERROR(ptrs_host_.Reserve(bytes));
  RETURN_IF_ERROR(ptrs_dev_.Reserve(bytes));
  std::memcpy(ptrs_host_.get(), ptrs, bytes);
  PDSERVE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(ptrs_dev_.get(), ptrs_host_.get(), bytes, cudaMemcpyHostToDevice, stream_));
  return ptrs_dev_.get<void* const>();
}

absl::Status DeviceStager::GatherToHost(absl::Span<const uint8_t* const> blocks,
                                        size_t block_bytes, void* dst) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Init());
  ASSIGN_OR_RETURN(std::vector<StagingRun> runs,
                   PlanStagingRuns(blocks.size(), block_bytes, kStagingBytes));
  for (const StagingRun& run : runs) {
    ASSIGN_OR_RETURN(void* const* ptrs,
                     UploadPointers(reinterpret_cast<const void* const*>(&blocks[run.first_block]),
                                    run.num_blocks));
    LaunchGatherBlocks(reinterpret_cast<const uint8_t* const*>(ptrs), block_bytes,
                       run.num_blocks, staging_.get<uint8_t>(), stream_);
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        static_cast<uint8_t*>(dst) + run.first_block * block_bytes, staging_.get(), run.bytes(),
        cudaMemcpyDeviceToHost, stream_));
    // The pinned pointer array and the staging buffer are reused next run.
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  }
  return absl::OkStatus();
}

absl::Status DeviceStager::ScatterFromHost(const void* src, absl::Span<uint8_t* const> blocks,
                                           size_t block_bytes) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Init());
  ASSIGN_OR_RETURN(std::vector<StagingRun> runs,
                   PlanStagingRuns(blocks.size(), block_bytes, kStagingBytes));
  for (const StagingRun& run : runs) {
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        staging_.get(), static_cast<const uint8_t*>(src) + run.first_block * block_bytes,
        run.bytes(), cudaMemcpyHostToDevice, stream_));
    ASSIGN_OR_RETURN(void* const* ptrs,
                     UploadPointers(reinterpret_cast<const void* const*>(&blocks[run.first_block]),
                                    run.num_blocks));
    LaunchScatterBlocks(staging_.get<uint8_t>(), block_bytes, run.num_blocks,
                        reinterpret_cast<uint8_t* const*>(ptrs), stream_);
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    // The blocks are complete when this returns: the engine may read them.
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  }
  return absl::OkStatus();
}

absl::Status DeviceStager::CopyBlocks(absl::Span<const uint8_t* const> src,
                                      absl::Span<uint8_t* const> dst, size_t block_bytes) {
  if (src.size() != dst.size()) return absl::InvalidArgumentError("copy: unequal block lists");
  if (src.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Init());
  // One upload of both pointer arrays: sources, then destinations.
  const size_t n = src.size(), bytes = 2 * n * sizeof(void*);
  RETURN_IF_ERROR(pairs_host_.Reserve(bytes));
  RETURN_IF_ERROR(pairs_dev_.Reserve(bytes));
  std::memcpy(pairs_host_.get(), src.data(), n * sizeof(void*));
  std::memcpy(pairs_host_.get<uint8_t>() + n * sizeof(void*), dst.data(), n * sizeof(void*));
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(pairs_dev_.get(), pairs_host_.get(), bytes,
                                               cudaMemcpyHostToDevice, stream_));
  uint8_t* const* dev = pairs_dev_.get<uint8_t* const>();
  LaunchCopyBlocks(reinterpret_cast<const uint8_t* const*>(dev), dev + n, block_bytes, n, stream_);
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  // The blocks are complete when this returns: the engine may read them.
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

}  // namespace pdserve::cuda
