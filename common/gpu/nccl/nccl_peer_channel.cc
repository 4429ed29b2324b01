#include "common/gpu/nccl/nccl_peer_channel.h"

#include <algorithm>
#include <atomic>
#include <deque>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/gpu/cuda/block_copy_kernels.h"
#include "common/gpu/cuda/cuda_status.h"
#include "common/gpu/cuda/device_buffer.h"
#include "common/gpu/nccl/nccl_communicator.h"
#include "common/kv/kv_staging_plan.h"

namespace pdserve::nccl {
namespace {

// Bounds one enqueue (NCCL connects to the peer on the first send/recv),
// and a wait for room among the frames in flight.
constexpr absl::Duration kEnqueueTimeout = absl::Seconds(30);
// Staging runs (a gather kernel and an ncclSend each) a sender may have on
// the stream before the receiver took the oldest. Headers free their queue
// slots once written, long before the GPU is done, so without this bound a
// slow receiver would let launches pile up until cudaLaunchKernel itself
// blocks (the launch queue holds about a thousand), where no interrupt is
// seen.
constexpr size_t kMaxRunsInFlight = 32;

class NcclPeerChannel : public KvPeerChannel {
 public:
  NcclPeerChannel(int device, int rank, std::unique_ptr<NcclCommunicator> comm, cudaStream_t stream,
                  cuda::DeviceBuffer staging)
      : device_(device),
        peer_(1 - rank),
        comm_(std::move(comm)),
        stream_(stream),
        staging_(std::move(staging)) {}
  ~NcclPeerChannel() override {
    cudaSetDevice(device_);
    comm_.reset();  // aborts: nothing may still run on the stream
    cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : sent_) cudaEventDestroy(e);
    cudaStreamDestroy(stream_);
  }

  absl::Status SendBlocks(absl::Span<const uint8_t* const> blocks, size_t block_bytes) override {
    return AbortOnError(
        ForEachRun(blocks.size(), block_bytes, [&](const StagingRun& run) -> absl::Status {
          RETURN_IF_ERROR(AwaitRoom());
          cuda::BlockList list;
          for (size_t i = 0; i < run.num_blocks; ++i) list.ptr[i] = blocks[run.first_block + i];
          list.n = static_cast<int>(run.num_blocks);
          cuda::LaunchGatherList(list, block_bytes, staging_.get<uint8_t>(), stream_);
          PDSERVE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
          RETURN_IF_ERROR(comm_->Send(staging_.get(), run.bytes(), peer_, stream_));
          RETURN_IF_ERROR(comm_->Flush(absl::Now() + kEnqueueTimeout));
          return RecordSent();
        }));
  }

  absl::Status RecvBlocks(absl::Span<uint8_t* const> blocks, size_t block_bytes) override {
    return AbortOnError(
        ForEachRun(blocks.size(), block_bytes, [&](const StagingRun& run) -> absl::Status {
          RETURN_IF_ERROR(comm_->Recv(staging_.get(), run.bytes(), peer_, stream_));
          RETURN_IF_ERROR(comm_->Flush(absl::Now() + kEnqueueTimeout));
          cuda::BlockList list;
          for (size_t i = 0; i < run.num_blocks; ++i) list.ptr[i] = blocks[run.first_block + i];
          list.n = static_cast<int>(run.num_blocks);
          cuda::LaunchScatterList(staging_.get<uint8_t>(), block_bytes, list, stream_);
          PDSERVE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
          return absl::OkStatus();
        }));
  }

  absl::Status Wait(absl::Time deadline) override {
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    const absl::Status st = comm_->Wait(stream_, deadline, &interrupted_);
    // Aborted kernels end with the stream: no block is written after this.
    if (!st.ok()) cudaStreamSynchronize(stream_);
    return st;
  }

  void Interrupt() override { interrupted_.store(true); }

  void Abort(const std::string& why) override {
    cudaSetDevice(device_);
    comm_->Abort(why);
    cudaStreamSynchronize(stream_);  // aborted kernels end: no block is read after this
  }

 private:
  // Runs of whole blocks that fit staging and one kernel's argument list;
  // both ends cut them the same way.
  template <typename F>
  absl::Status ForEachRun(size_t n, size_t block_bytes, F&& fn) {
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    const size_t capacity =
        std::min(staging_.bytes(), static_cast<size_t>(cuda::BlockList::kMax) * block_bytes);
    ASSIGN_OR_RETURN(std::vector<StagingRun> runs, PlanStagingRuns(n, block_bytes, capacity));
    for (const StagingRun& run : runs) RETURN_IF_ERROR(fn(run));
    return absl::OkStatus();
  }

  // A failed enqueue leaves earlier runs' kernels on the stream, still
  // reading or writing blocks: abort and drain before the caller takes the
  // blocks back.
  absl::Status AbortOnError(absl::Status st) {
    if (!st.ok()) Abort(std::string(st.message()));
    return st;
  }

  bool interrupted() const { return interrupted_.load() || comm_->interrupted(); }

  // Until fewer than kMaxRunsInFlight sent runs are unfinished.
  absl::Status AwaitRoom() {
    const absl::Time deadline = absl::Now() + kEnqueueTimeout;
    while (!sent_.empty()) {
      ASSIGN_OR_RETURN(const bool done,
                       cuda::QueryDone(cudaEventQuery(sent_.front()), "cudaEventQuery"));
      if (done) {
        cudaEventDestroy(sent_.front());
        sent_.pop_front();
        continue;
      }
      if (sent_.size() < kMaxRunsInFlight) return absl::OkStatus();
      if (interrupted()) return absl::CancelledError("nccl: send interrupted");
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError("nccl: the receiver took no frame in time");
      }
      absl::SleepFor(absl::Microseconds(50));
    }
    return absl::OkStatus();
  }

  absl::Status RecordSent() {
    cudaEvent_t e = nullptr;
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    if (absl::Status st = cuda::CudaStatus(cudaEventRecord(e, stream_), "cudaEventRecord");
        !st.ok()) {
      cudaEventDestroy(e);
      return st;
    }
    sent_.push_back(e);
    return absl::OkStatus();
  }

  const int device_;
  const int peer_;
  std::unique_ptr<NcclCommunicator> comm_;
  cudaStream_t stream_;
  cuda::DeviceBuffer staging_;
  std::atomic<bool> interrupted_{false};
  std::deque<cudaEvent_t> sent_;  // one per sent run, oldest first
};

}  // namespace

absl::StatusOr<std::string> NewNcclChannelId() { return NcclCommunicator::NewUniqueId(); }

absl::StatusOr<std::unique_ptr<KvPeerChannel>> JoinNcclChannel(
    int device, const std::string& id, int rank, absl::Time deadline,
    const std::atomic<bool>* interrupted) {
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cuda::DeviceBuffer staging;
  RETURN_IF_ERROR(staging.Reserve(kChannelStagingBytes));
  ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> comm,
                   NcclCommunicator::Connect(id, {.nranks = 2,
                                                  .rank = rank,
                                                  .device = device,
                                                  .deadline = deadline,
                                                  .interrupted = interrupted}));
  cudaStream_t stream = nullptr;
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // NCCL connects a send/recv pair lazily, with both ranks taking part. Do
  // it now, while both are here joining: later sends then enqueue without
  // waiting for the peer (which posts its receives only after reading the
  // frame header the sender queues after the send).
  absl::Status st = comm->GroupStart();
  if (st.ok()) {
    st = rank == 0 ? comm->Send(staging.get(), 1, 1, stream)
                   : comm->Recv(staging.get(), 1, 0, stream);
  }
  if (st.ok()) st = comm->GroupEnd(deadline);
  if (st.ok()) st = comm->Wait(stream, deadline);
  if (!st.ok()) {
    comm.reset();
    cudaStreamDestroy(stream);
    return absl::Status(st.code(), absl::StrCat("nccl channel warm-up: ", st.message()));
  }
  return std::unique_ptr<KvPeerChannel>(
      new NcclPeerChannel(device, rank, std::move(comm), stream, std::move(staging)));
}

}  // namespace pdserve::nccl
