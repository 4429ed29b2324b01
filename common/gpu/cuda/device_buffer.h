// DeviceBuffer: an owned, grow-only allocation of device memory, and
// PinnedBuffer: the same for page-locked host memory (async copies need it).
// Internal to common/gpu/cuda/. Not thread-safe.
#ifndef PDSERVE_COMMON_GPU_CUDA_DEVICE_BUFFER_H_
#define PDSERVE_COMMON_GPU_CUDA_DEVICE_BUFFER_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "common/gpu/cuda/cuda_status.h"

namespace pdserve::cuda {

template <bool kPinned>
class RawBuffer {
 public:
  RawBuffer() = default;
  ~RawBuffer() { Release(); }
  RawBuffer(const RawBuffer&) = delete;
  RawBuffer& operator=(const RawBuffer&) = delete;
  RawBuffer(RawBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  RawBuffer& operator=(RawBuffer&& o) noexcept {
    if (this != &o) {
      Release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }

  // Makes the buffer hold at least `bytes`; contents are lost when it grows.
  absl::Status Reserve(size_t bytes) {
    if (bytes <= bytes_) return absl::OkStatus();
    Release();
    void* p = nullptr;
    if constexpr (kPinned) {
      PDSERVE_CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, bytes));
    } else {
      PDSERVE_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
    }
    ptr_ = p;
    bytes_ = bytes;
    return absl::OkStatus();
  }

  template <typename T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void Release() {
    if (ptr_ == nullptr) return;
    if constexpr (kPinned) {
      cudaFreeHost(ptr_);
    } else {
      cudaFree(ptr_);
    }
    ptr_ = nullptr;
    bytes_ = 0;
  }

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = RawBuffer<false>;
using PinnedBuffer = RawBuffer<true>;

}  // namespace pdserve::cuda

#endif  // PDSERVE_COMMON_GPU_CUDA_DEVICE_BUFFER_H_
