// NcclCommunicator: one NCCL communicator, made for moving KV between a
// prefill and a decode GPU (ranks 0 and 1), or a rank and itself on a
// one-GPU machine. Every NCCL result becomes an absl::Status, and no call
// can wait forever: the communicator is created non-blocking and each wait
// has a deadline, after which the communicator is aborted (ncclCommAbort),
// the call returns DEADLINE_EXCEEDED and the object is dead (rebuild it).
//
// Internal to common/gpu/nccl/ and the GPU tests and tools: it includes CUDA
// and NCCL headers. Thread-compatible: one thread drives a communicator.
#ifndef PDSERVE_COMMON_GPU_NCCL_NCCL_COMMUNICATOR_H_
#define PDSERVE_COMMON_GPU_NCCL_NCCL_COMMUNICATOR_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pdserve::nccl {

absl::Status NcclStatus(ncclResult_t result, const char* what);

class NcclCommunicator {
 public:
  // Rank 0 makes the id and hands its bytes to the other ranks over the
  // control plane; they are opaque (sizeof(ncclUniqueId) bytes).
  static absl::StatusOr<std::string> NewUniqueId();

  struct Options {
    int nranks = 2;
    int rank = 0;
    int device = 0;
    absl::Time deadline = absl::InfiniteFuture();  // for joining
    // Joining, and every later wait of the communicator, also gives up
    // (aborting it) once another thread sets this; must outlive it.
    const std::atomic<bool>* interrupted = nullptr;
  };
  // Joins the communicator named by `unique_id`; returns once every rank
  // joined, or DEADLINE_EXCEEDED (aborted) at the deadline.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Connect(const std::string& unique_id,
                                                                   const Options& options);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Enqueue on `stream`; both sides must post matching calls in the same
  // order. Send and Recv to the same peer in one step (a rank to itself)
  // must sit between GroupStart and GroupEnd.
  absl::Status GroupStart();
  // Connecting to a peer happens here the first time: bounded by deadline.
  absl::Status GroupEnd(absl::Time deadline);
  absl::Status Send(const void* buf, size_t bytes, int peer, cudaStream_t stream);
  absl::Status Recv(void* buf, size_t bytes, int peer, cudaStream_t stream);

  // Until the last non-blocking call is fully enqueued (NCCL may still be
  // setting it up when Send/Recv return); aborts at the deadline.
  absl::Status Flush(absl::Time deadline);
  // Waits for everything enqueued on `stream`, watching the communicator
  // for asynchronous errors (a peer that died). At the deadline, or once
  // *interrupted (set by another thread) is true: abort.
  absl::Status Wait(cudaStream_t stream, absl::Time deadline,
                    const std::atomic<bool>* interrupted = nullptr);

  // Idempotent. After it, every call fails with ABORTED.
  void Abort(const std::string& why);
  bool aborted() const { return aborted_; }
  // Whether the Options' interrupt flag is set.
  bool interrupted() const { return Interrupted(nullptr); }
  int rank() const { return rank_; }

 private:
  NcclCommunicator(ncclComm_t comm, int rank, int device, const std::atomic<bool>* interrupted)
      : comm_(comm), rank_(rank), device_(device), interrupted_(interrupted) {}
  bool Interrupted(const std::atomic<bool>* also) const {
    return (interrupted_ != nullptr && interrupted_->load()) || (also != nullptr && also->load());
  }
  // Polls a non-blocking call's completion until the deadline.
  absl::Status Settle(ncclResult_t started, const char* what, absl::Time deadline);

  ncclComm_t comm_;
  const int rank_;
  const int device_;
  const std::atomic<bool>* const interrupted_;
  bool aborted_ = false;
  std::string abort_reason_;
};

}  // namespace pdserve::nccl

#endif  // PDSERVE_COMMON_GPU_NCCL_NCCL_COMMUNICATOR_H_
