// PrefillAttempts: the prefill side of one request while its decode worker
// holds a KV reservation — the Prefill calls made (first try and retries,
// on every worker tried), the retry budget, the workers that failed the
// request, the RetryTransfer call that moves the reservation to a new
// epoch before a retry, and the progress of the call in flight. The
// decisions (retry, back off, fall back to local prefill, fail) are
// GenerateFsm's; this keeps their facts in one place.
//
// Attempt numbers count the Prefill calls (and, separately, the
// RetryTransfer calls) of the request from 0; GenerateCall keeps the RPC of
// each under that number.
//
// Not thread-safe (GenerateFsm serialises access).
#ifndef PDSERVE_ROUTER_CALL_PREFILL_ATTEMPTS_H_
#define PDSERVE_ROUTER_CALL_PREFILL_ATTEMPTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/support/status.h"
#include "pdserve/v1/worker.pb.h"
#include "router/pool/worker_snapshot.h"

namespace pdserve::router {

class PrefillAttempts {
 public:
  // The decode worker's reservation for the current remote attempt; its
  // epoch moves on with every RetryTransfer.
  void Reserve(const v1::Reserved& reserved) { reserved_ = reserved; }
  const v1::Reserved& reserved() const { return reserved_; }
  void SetEpoch(uint64_t epoch) { reserved_.set_epoch(epoch); }

  // A Prefill call begins on `address`, whose LoadReport.prefill_progress
  // reads `progress`: returns its attempt number.
  int Begin(const std::string& address, uint64_t progress, absl::Time now);
  // The call in flight ended; `response` is kept when it succeeded.
  void End(const grpc::Status& status, const v1::PrefillResponse& response);
  // The call in flight is given up (watchdog): it counts as failed.
  void Abandon();
  // A new placement: no Prefill call of it has succeeded yet.
  void ForgetSuccess() { ok_ = false; }

  // Whether `attempt` is the call in flight.
  bool IsCurrent(int attempt) const { return in_flight_ && attempt == current(); }
  bool in_flight() const { return in_flight_; }
  // The last call's number (-1 before the first) and worker.
  int current() const { return static_cast<int>(addresses_.size()) - 1; }
  const std::string& address() const { return addresses_.back(); }
  int calls() const { return static_cast<int>(addresses_.size()); }
  // When the last call began.
  absl::Time started() const { return started_; }
  // The last call's response if it succeeded on the current placement.
  const v1::PrefillResponse* response() const { return ok_ ? &response_ : nullptr; }

  // Retries used, and the workers that failed this request.
  int retries() const { return retries_; }
  const std::vector<std::string>& failed() const { return failed_; }
  // `address` failed and the request retries elsewhere.
  void CountRetry(const std::string& address);

  // A RetryTransfer call begins: returns its attempt number.
  int BeginTransferRetry() {
    transfer_retry_ = transfer_retries_++;
    return *transfer_retry_;
  }
  bool IsCurrentTransferRetry(int attempt) const { return transfer_retry_ == attempt; }
  void EndTransferRetry() { transfer_retry_.reset(); }

  // What to cancel when the prefill side of the attempt stops.
  struct InFlight {
    std::optional<int> prefill;
    std::optional<int> transfer_retry;
  };
  InFlight Stop();

  // DEADLINE_EXCEEDED when the worker `w` (null: it left the pool)
  // computed no prompt token for `window` (--prefill_attempt_timeout_ms,
  // 0: never); otherwise notes its progress and returns OK. Any prompt
  // computed counts, ours or one queued ahead of it: admission
  // (start_within_ms) already bounds how long ours waits behind others.
  grpc::Status Stall(const WorkerState* w, absl::Duration window, absl::Time now);

 private:
  v1::Reserved reserved_;
  std::vector<std::string> addresses_;  // of every Prefill call, oldest first
  bool in_flight_ = false;
  bool ok_ = false;
  v1::PrefillResponse response_;
  absl::Time started_;
  // The worker's progress counter last seen, and since when.
  uint64_t progress_ = 0;
  absl::Time progress_at_;
  int retries_ = 0;
  std::vector<std::string> failed_;
  int transfer_retries_ = 0;
  std::optional<int> transfer_retry_;  // in flight
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_PREFILL_ATTEMPTS_H_
