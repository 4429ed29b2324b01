#include "common/gpu/nccl/nccl_communicator.h"

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/gpu/cuda/cuda_status.h"
#include "glog/logging.h"

namespace pdserve::nccl {
namespace {

// Short enough that a deadline is honoured to within a millisecond, long
// enough that polling costs nothing next to a transfer.
constexpr absl::Duration kPoll = absl::Microseconds(50);

}  // namespace

absl::Status NcclStatus(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return absl::OkStatus();
  const std::string msg = absl::StrCat("nccl: ", what, ": ", ncclGetErrorString(result));
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(msg);
    case ncclRemoteError:
    case ncclSystemError:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::StatusOr<std::string> NcclCommunicator::NewUniqueId() {
  ncclUniqueId id;
  if (absl::Status st = NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"); !st.ok()) return st;
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Connect(
    const std::string& unique_id, const Options& options) {
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id.internal)) {
    return absl::InvalidArgumentError(absl::StrCat("nccl: unique id of ", unique_id.size(),
                                                   " bytes, want ", sizeof(id.internal)));
  }
  if (options.rank < 0 || options.rank >= options.nranks) {
    return absl::InvalidArgumentError("nccl: rank outside [0, nranks)");
  }
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so that joining, and every later call, can time out
  ncclComm_t comm = nullptr;
  const ncclResult_t started =
      ncclCommInitRankConfig(&comm, options.nranks, id, options.rank, &config);
  if (started != ncclSuccess && started != ncclInProgress) {
    // A failed init may still have allocated the communicator.
    if (comm != nullptr) ncclCommAbort(comm);
    return NcclStatus(started, "ncclCommInitRankConfig");
  }
  std::unique_ptr<NcclCommunicator> c(
      new NcclCommunicator(comm, options.rank, options.device, options.interrupted));
  if (absl::Status st = c->Settle(started, "ncclCommInitRankConfig", options.deadline); !st.ok()) {
    return st;
  }
  return c;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  cudaSetDevice(device_);
  if (aborted_) return;  // ncclCommAbort already freed it
  // Destroying a healthy non-blocking communicator may not finish if a peer
  // is gone; abort is always safe and bounded.
  ncclCommAbort(comm_);
}

absl::Status NcclCommunicator::Settle(ncclResult_t started, const char* what, absl::Time deadline) {
  ncclResult_t state = started;
  while (state == ncclInProgress) {
    if (Interrupted(nullptr)) {
      Abort(absl::StrCat(what, " interrupted"));
      return absl::CancelledError(absl::StrCat("nccl: ", what, " interrupted"));
    }
    if (absl::Now() >= deadline) {
      Abort(absl::StrCat(what, " past its deadline"));
      return absl::DeadlineExceededError(absl::StrCat("nccl: ", what, " did not complete in time"));
    }
    absl::SleepFor(kPoll);
    if (absl::Status st = NcclStatus(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
        !st.ok()) {
      Abort(st.ToString());
      return st;
    }
  }
  if (state != ncclSuccess) {
    const absl::Status st = NcclStatus(state, what);
    Abort(st.ToString());
    return st;
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::GroupStart() {
  if (aborted_) return absl::AbortedError(abort_reason_);
  return NcclStatus(ncclGroupStart(), "ncclGroupStart");
}

absl::Status NcclCommunicator::GroupEnd(absl::Time deadline) {
  if (aborted_) return absl::AbortedError(abort_reason_);
  return Settle(ncclGroupEnd(), "ncclGroupEnd", deadline);
}

absl::Status NcclCommunicator::Send(const void* buf, size_t bytes, int peer, cudaStream_t stream) {
  if (aborted_) return absl::AbortedError(abort_reason_);
  const ncclResult_t r = ncclSend(buf, bytes, ncclUint8, peer, comm_, stream);
  if (r != ncclSuccess && r != ncclInProgress) return NcclStatus(r, "ncclSend");
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Recv(void* buf, size_t bytes, int peer, cudaStream_t stream) {
  if (aborted_) return absl::AbortedError(abort_reason_);
  const ncclResult_t r = ncclRecv(buf, bytes, ncclUint8, peer, comm_, stream);
  if (r != ncclSuccess && r != ncclInProgress) return NcclStatus(r, "ncclRecv");
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Flush(absl::Time deadline) {
  if (aborted_) return absl::AbortedError(abort_reason_);
  ncclResult_t state = ncclSuccess;
  if (absl::Status st = NcclStatus(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
      !st.ok()) {
    return st;
  }
  return Settle(state, "enqueue", deadline);
}

absl::Status NcclCommunicator::Wait(cudaStream_t stream, absl::Time deadline,
                                    const std::atomic<bool>* interrupted) {
  if (aborted_) return absl::AbortedError(abort_reason_);
  while (true) {
    ASSIGN_OR_RETURN(const bool done, cuda::QueryDone(cudaStreamQuery(stream), "cudaStreamQuery"));
    if (done) return absl::OkStatus();
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm_, &state);
    if (state != ncclSuccess && state != ncclInProgress) {
      const absl::Status st = NcclStatus(state, "transfer");
      Abort(st.ToString());
      return st;
    }
    if (Interrupted(interrupted)) {
      Abort("transfer interrupted");
      return absl::CancelledError("nccl: transfer interrupted");
    }
    if (absl::Now() >= deadline) {
      Abort("transfer past its deadline");
      return absl::DeadlineExceededError("nccl: transfer did not complete before its deadline");
    }
    absl::SleepFor(kPoll);
  }
}

void NcclCommunicator::Abort(const std::string& why) {
  if (aborted_) return;
  aborted_ = true;
  abort_reason_ = absl::StrCat("nccl communicator aborted: ", why);
  LOG(WARNING) << abort_reason_;
  cudaSetDevice(device_);
  ncclCommAbort(comm_);
}

}  // namespace pdserve::nccl
