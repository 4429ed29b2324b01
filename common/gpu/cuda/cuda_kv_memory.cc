#include "common/gpu/cuda/cuda_kv_memory.h"

#include <cuda_runtime.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/gpu/cuda/cuda_device.h"
#include "common/gpu/cuda/cuda_status.h"
#include "common/gpu/cuda/device_allocation.h"
#include "common/gpu/cuda/device_stager.h"

namespace pdserve::cuda {
namespace {

// Another process's pool, mapped with cudaIpcOpenMemHandle.
class CudaPeerPool : public KvPeerPool {
 public:
  CudaPeerPool(int device, uint8_t* data, size_t size)
      : device_(device), data_(data), size_(size) {}
  ~CudaPeerPool() override {
    cudaSetDevice(device_);
    cudaIpcCloseMemHandle(data_);
  }
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  const int device_;
  uint8_t* const data_;
  const size_t size_;
};

class CudaKvMemory : public KvDeviceMemory {
 public:
  CudaKvMemory(int device, uint8_t* data, size_t size, PeerChannelMaker channels)
      : device_(device), data_(data), size_(size), channels_(std::move(channels)) {}
  ~CudaKvMemory() override {
    cudaSetDevice(device_);
    cudaFree(data_);
  }
  uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

  absl::Status GatherToHost(absl::Span<const uint8_t* const> blocks, size_t block_bytes,
                            void* dst) const override {
    return stager_.GatherToHost(blocks, block_bytes, dst);
  }
  absl::Status ScatterFromHost(const void* src, absl::Span<uint8_t* const> blocks,
                               size_t block_bytes) const override {
    return stager_.ScatterFromHost(src, blocks, block_bytes);
  }
  absl::StatusOr<std::string> ExportHandle() const override {
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    cudaIpcMemHandle_t handle;
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaIpcGetMemHandle(&handle, data_));
    return std::string(handle.reserved, sizeof(handle.reserved));
  }
  absl::StatusOr<std::unique_ptr<KvPeerPool>> OpenPeer(const std::string& bytes,
                                                       size_t size) const override {
    cudaIpcMemHandle_t handle;
    if (bytes.size() != sizeof(handle.reserved)) {
      return absl::InvalidArgumentError(absl::StrCat("cuda ipc: a handle of ", bytes.size(),
                                                     " bytes, want ", sizeof(handle.reserved)));
    }
    std::memcpy(handle.reserved, bytes.data(), sizeof(handle.reserved));
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    void* p = nullptr;
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess));
    auto pool = std::make_unique<CudaPeerPool>(device_, static_cast<uint8_t*>(p), size);
    // The peer states its pool size and we bound its block ids by it, so the
    // claim is checked against the mapping itself: a larger claim would let
    // a copy read past the end and fault this process's context.
    absl::StatusOr<size_t> mapped = BytesToAllocationEnd(p);
    if (!mapped.ok()) return mapped.status();
    if (*mapped < size) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda ipc: peer claims a pool of ", size, " bytes but maps only ", *mapped));
    }
    return std::unique_ptr<KvPeerPool>(std::move(pool));
  }
  absl::Status CopyBlocks(absl::Span<const uint8_t* const> src, absl::Span<uint8_t* const> dst,
                          size_t block_bytes) const override {
    return stager_.CopyBlocks(src, dst, block_bytes);
  }
  bool SupportsPeerChannels() const override { return channels_.new_id && channels_.join; }
  absl::StatusOr<std::string> NewPeerChannelId() const override {
    if (!SupportsPeerChannels()) return KvDeviceMemory::NewPeerChannelId();
    return channels_.new_id();
  }
  absl::StatusOr<std::unique_ptr<KvPeerChannel>> JoinPeerChannel(
      const std::string& id, int rank, absl::Time deadline,
      const std::atomic<bool>* interrupted) const override {
    if (!SupportsPeerChannels()) {
      return KvDeviceMemory::JoinPeerChannel(id, rank, deadline, interrupted);
    }
    return channels_.join(device_, id, rank, deadline, interrupted);
  }

 private:
  const int device_;
  uint8_t* const data_;
  const size_t size_;
  const PeerChannelMaker channels_;
  mutable DeviceStager stager_{device_};
};

}  // namespace

absl::StatusOr<std::unique_ptr<KvDeviceMemory>> AllocateKvDeviceMemory(int device, size_t bytes,
                                                                       PeerChannelMaker channels) {
  if (absl::Status st = CheckDevice(device); !st.ok()) return st;
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  void* p = nullptr;
  if (absl::Status st = CudaStatus(cudaMalloc(&p, bytes), "cudaMalloc(kv pool)"); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat(st.message(), " for ", bytes, " bytes of KV"));
  }
  // Zeroed so a block never exposes another request's bytes.
  // The memset runs on the legacy default stream, which the runner's and
  // the stager's non-blocking streams do not wait for: finish it here.
  absl::Status st = CudaStatus(cudaMemset(p, 0, bytes), "cudaMemset(kv pool)");
  if (st.ok()) st = CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize(kv pool)");
  if (!st.ok()) {
    cudaFree(p);
    return st;
  }
  return std::make_unique<CudaKvMemory>(device, static_cast<uint8_t*>(p), bytes,
                                        std::move(channels));
}

}  // namespace pdserve::cuda
