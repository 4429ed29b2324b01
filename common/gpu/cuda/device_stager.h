// DeviceStager: moves scattered device KV blocks to and from one packed
// host buffer through a fixed-size device staging buffer: a gather (or
// scatter) kernel plus one bulk copy per staging run, instead of a copy per
// block; and copies blocks device to device (CUDA IPC pulls). Memory per stager is fixed: kStagingBytes of device memory plus
// the pointer arrays of one run. Internal to common/gpu/cuda/.
//
// Thread-safe (one mutex; a call holds it until its copies are done).
#ifndef PDSERVE_COMMON_GPU_CUDA_DEVICE_STAGER_H_
#define PDSERVE_COMMON_GPU_CUDA_DEVICE_STAGER_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/gpu/cuda/device_buffer.h"

namespace pdserve::cuda {

class DeviceStager {
 public:
  static constexpr size_t kStagingBytes = size_t{8} << 20;

  explicit DeviceStager(int device) : device_(device) {}
  ~DeviceStager();
  DeviceStager(const DeviceStager&) = delete;
  DeviceStager& operator=(const DeviceStager&) = delete;

  absl::Status GatherToHost(absl::Span<const uint8_t* const> blocks, size_t block_bytes,
                            void* dst);
  absl::Status ScatterFromHost(const void* src, absl::Span<uint8_t* const> blocks,
                               size_t block_bytes);
  // Device-to-device block copies (sources may be in a peer's pool).
  absl::Status CopyBlocks(absl::Span<const uint8_t* const> src, absl::Span<uint8_t* const> dst,
                          size_t block_bytes);

 private:
  absl::Status Init() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Uploads the run's block pointers; returns the device copy.
  absl::StatusOr<void* const*> UploadPointers(const void* const* ptrs, size_t n)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int device_;
  absl::Mutex mu_;
  cudaStream_t stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  DeviceBuffer staging_ ABSL_GUARDED_BY(mu_);
  PinnedBuffer ptrs_host_ ABSL_GUARDED_BY(mu_);
  DeviceBuffer ptrs_dev_ ABSL_GUARDED_BY(mu_);
  PinnedBuffer pairs_host_ ABSL_GUARDED_BY(mu_);
  DeviceBuffer pairs_dev_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdserve::cuda

#endif  // PDSERVE_COMMON_GPU_CUDA_DEVICE_STAGER_H_
