// Gathers scattered KV blocks into one packed buffer and scatters a packed
// buffer back into blocks, on the device: the staging step of every device
// KV transport (TCP through host memory today; NCCL and CUDA IPC move the
// packed buffer as is). Internal to common/gpu/cuda/.
#ifndef PDSERVE_COMMON_GPU_CUDA_BLOCK_COPY_KERNELS_H_
#define PDSERVE_COMMON_GPU_CUDA_BLOCK_COPY_KERNELS_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace pdserve::cuda {

// dst[i * block_bytes ...] = *blocks[i], for i < n. `blocks` is a device
// array of device pointers.
void LaunchGatherBlocks(const uint8_t* const* blocks, size_t block_bytes, size_t n, uint8_t* dst,
                        cudaStream_t stream);

// *blocks[i] = src[i * block_bytes ...], for i < n.
void LaunchScatterBlocks(const uint8_t* src, size_t block_bytes, size_t n, uint8_t* const* blocks,
                         cudaStream_t stream);

// *dst[i] = *src[i], for i < n (sources may be a peer's mapped pool).
void LaunchCopyBlocks(const uint8_t* const* src, uint8_t* const* dst, size_t block_bytes, size_t n,
                      cudaStream_t stream);

// Up to kMax block addresses passed by value as a kernel argument, so that
// no host memory has to outlive an asynchronous launch.
struct BlockList {
  static constexpr int kMax = 128;
  const uint8_t* ptr[kMax];
  int n = 0;
};

// dst[i * block_bytes ...] = *src.ptr[i].
void LaunchGatherList(const BlockList& src, size_t block_bytes, uint8_t* dst, cudaStream_t stream);
// *dst.ptr[i] = src[i * block_bytes ...]; null entries are skipped.
void LaunchScatterList(const uint8_t* src, size_t block_bytes, const BlockList& dst,
                       cudaStream_t stream);

}  // namespace pdserve::cuda

#endif  // PDSERVE_COMMON_GPU_CUDA_BLOCK_COPY_KERNELS_H_
