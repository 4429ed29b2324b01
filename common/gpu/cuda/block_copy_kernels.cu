#include "common/gpu/cuda/block_copy_kernels.h"

namespace pdserve::cuda {
namespace {

constexpr int kThreads = 256;

// One CUDA block per KV block; 16-byte words when both ends allow it.
__device__ void CopyBlock(const uint8_t* src, uint8_t* dst, size_t bytes) {
  const bool wide = (reinterpret_cast<uintptr_t>(src) % 16 == 0) &&
                    (reinterpret_cast<uintptr_t>(dst) % 16 == 0) && bytes % 16 == 0;
  if (wide) {
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (size_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) d[i] = s[i];
  } else {
    for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
  }
}

__global__ void GatherKernel(const uint8_t* const* blocks, size_t block_bytes, uint8_t* dst) {
  CopyBlock(blocks[blockIdx.x], dst + blockIdx.x * block_bytes, block_bytes);
}

__global__ void ScatterKernel(const uint8_t* src, size_t block_bytes, uint8_t* const* blocks) {
  CopyBlock(src + blockIdx.x * block_bytes, blocks[blockIdx.x], block_bytes);
}

__global__ void CopyKernel(const uint8_t* const* src, uint8_t* const* dst, size_t block_bytes) {
  CopyBlock(src[blockIdx.x], dst[blockIdx.x], block_bytes);
}

__global__ void GatherListKernel(BlockList src, size_t block_bytes, uint8_t* dst) {
  CopyBlock(src.ptr[blockIdx.x], dst + blockIdx.x * block_bytes, block_bytes);
}

__global__ void ScatterListKernel(const uint8_t* src, size_t block_bytes, BlockList dst) {
  uint8_t* d = const_cast<uint8_t*>(dst.ptr[blockIdx.x]);
  if (d != nullptr) CopyBlock(src + blockIdx.x * block_bytes, d, block_bytes);
}

}  // namespace

void LaunchGatherList(const BlockList& src, size_t block_bytes, uint8_t* dst, cudaStream_t stream) {
  if (src.n == 0) return;
  GatherListKernel<<<static_cast<unsigned>(src.n), kThreads, 0, stream>>>(src, block_bytes, dst);
}

void LaunchScatterList(const uint8_t* src, size_t block_bytes, const BlockList& dst,
                       cudaStream_t stream) {
  if (dst.n == 0) return;
  ScatterListKernel<<<static_cast<unsigned>(dst.n), kThreads, 0, stream>>>(src, block_bytes, dst);
}

void LaunchCopyBlocks(const uint8_t* const* src, uint8_t* const* dst, size_t block_bytes, size_t n,
                      cudaStream_t stream) {
  if (n == 0) return;
  CopyKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(src, dst, block_bytes);
}

void LaunchGatherBlocks(const uint8_t* const* blocks, size_t block_bytes, size_t n, uint8_t* dst,
                        cudaStream_t stream) {
  if (n == 0) return;
  GatherKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(blocks, block_bytes, dst);
}

void LaunchScatterBlocks(const uint8_t* src, size_t block_bytes, size_t n, uint8_t* const* blocks,
                         cudaStream_t stream) {
  if (n == 0) return;
  ScatterKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(src, block_bytes, blocks);
}

}  // namespace pdserve::cuda
