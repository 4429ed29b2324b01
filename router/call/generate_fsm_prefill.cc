// GenerateFsm's prefill-side transitions (PrefillAttempts holds their
// state): a remote prefill started under the reservation's epoch, its
// failures retried with backoff and RetryTransfer, and the fall-back to
// prefill on the decode worker. Apart from generate_fsm.cc to keep each
// file one concern; the class and its invariants are in generate_fsm.h.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"
#include "router/call/generate_fsm.h"
#include "router/call/worker_failure.h"
#include "router/call/worker_requests.h"

namespace pdserve::router {

void GenerateFsm::StartPrefill(Actions* a) {
  std::shared_ptr<const RegistrySnapshot> snapshot = env_.workers->snapshot();
  PrefillQuery q;
  q.policy = env_.config->prefill_policy;
  q.prompt = request_.prompt_tokens;
  q.excluded = prefill_.failed();
  q.ticket = env_.prefill_ticket->fetch_add(1, std::memory_order_relaxed);
  q.now = Now();
  if (env_.breaker != nullptr) q.ejected = env_.breaker->Ejected(q.now);
  absl::StatusOr<const WorkerState*> prefill = PickPrefill(*snapshot, decode_worker_, q);
  if (!prefill.ok() || !env_.workers->ReachPrefill((*prefill)->address)) {
    // None left (all failed this request, all gone since placement, or
    // the ones left no longer pair with this decode worker, as in a
    // rollout): the decode worker prefills.
    FallBackToLocalPrefill(absl::IsFailedPrecondition(prefill.status())
                               ? "no prefill worker pairs with this decode worker"
                               : "no usable prefill worker left",
                           a);
    return;
  }
  const std::string& address = (*prefill)->address;
  if (env_.metrics != nullptr) env_.metrics->CountRouting(RoutingTier::kPrefill, q.policy);
  v1::PrefillRequest r =
      MakePrefillRequest(id_, request_, prefill_.reserved(), decode_worker_.info.kv_endpoint());
  // No deadline of its own: a long prompt takes as long as it takes while
  // the worker computes (the watchdog gives up on one that stops). It must
  // start within the same window, or the worker refuses it at once.
  r.set_start_within_ms(
      static_cast<uint32_t>(absl::ToInt64Milliseconds(retry_.prefill_attempt_timeout)));
  const int attempt = prefill_.Begin(address, (*prefill)->load.prefill_progress(), Now());
  a->start_prefill = PrefillStart{attempt, address, std::move(r)};
  PushStarted(address, a);
  LOG(INFO) << "[" << id_ << "] prefill on " << address << " (epoch "
            << prefill_.reserved().epoch() << ")";
}

GenerateFsm::Actions GenerateFsm::OnPrefillDone(int attempt, const grpc::Status& status,
                                                const v1::PrefillResponse& response) {
  Actions a;
  // A call replaced by a retry or a failover was already accounted for.
  if (!prefill_.IsCurrent(attempt)) return a;
  prefill_.End(status, response);
  if (status.ok()) {
    if (env_.breaker != nullptr) env_.breaker->RecordSuccess(prefill_.address());
    LOG(INFO) << "[" << id_ << "] prefilled by " << prefill_.address() << " in "
              << response.compute_ms() << " ms, KV " << response.kv_transfer_bytes()
              << " bytes in " << response.kv_transfer_ms() << " ms";
  } else if (!done()) {
    HandlePrefillFailure(status, &a);
  }
  MaybeComplete(&a);
  return a;
}

void GenerateFsm::HandlePrefillFailure(const grpc::Status& status, Actions* a) {
  const std::string address = prefill_.address();
  if (state_ == State::kCompleting || kv_committed_) {
    // The decode worker got the KV; only the prefill worker's report
    // (ack/metrics) was lost.
    LOG(WARNING) << "[" << id_ << "] prefill worker " << address
                 << " failed after its KV was committed: " << status.error_message();
    return;
  }
  const bool deadline_passed = DeadlinePassed();
  if (IsWorkerHealthFailure(status)) RecordWorkerFailure(address, prefill_.started());
  if (decode_active_ && !deadline_passed && prefill_.retries() >= retry_.prefill_retries &&
      status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    // Busy prefill workers (their queues would not start the prompt in
    // time) are no reason to fail: the decode worker can prefill it.
    LOG(WARNING) << "[" << id_ << "] prefill worker " << address
                 << " refused: " << status.error_message() << "; retries used up";
    FallBackToLocalPrefill("no prefill worker could start the prompt in time", a);
    return;
  }
  if (!decode_active_ || prefill_.retries() >= retry_.prefill_retries ||
      !IsRetryableWorkerFailure(status, deadline_passed)) {
    grpc::Status failure = WorkerFailureStatus("prefill", address, status);
    if (prefill_.retries() > 0) {
      failure = grpc::Status(failure.error_code(),
                             absl::StrCat(failure.error_message(), " (after ", prefill_.retries(),
                                          " prefill retries)"));
    }
    Fail(failure, a);
    return;
  }
  prefill_.CountRetry(address);
  double jitter = 0;
  if (env_.jitter) {
    jitter = env_.jitter();
  } else {
    absl::BitGen gen;
    jitter = absl::Uniform<double>(gen, 0, 1);
  }
  const absl::Duration delay = RetryBackoff(retry_, prefill_.retries(), jitter);
  LOG(WARNING) << "[" << id_ << "] prefill worker " << address << " failed ("
               << StatusCodeName(status.error_code()) << ": " << status.error_message()
               << "); retry " << prefill_.retries() << " of " << retry_.prefill_retries << " in "
               << absl::FormatDuration(delay);
  StartBackoff(delay, /*place=*/false, a);
}

void GenerateFsm::StartBackoff(absl::Duration delay, bool place, Actions* a) {
  backoff_ = place ? BackoffFor::kPlacement : BackoffFor::kTransferRetry;
  backoff_placement_ = placement_;
  a->start_backoff = Backoff{delay, ++backoff_id_};
}

GenerateFsm::Actions GenerateFsm::OnBackoffDone(uint64_t id) {
  Actions a;
  if (id != backoff_id_ || backoff_placement_ != placement_ || backoff_ == BackoffFor::kNone ||
      done()) {
    return a;
  }
  const BackoffFor what = backoff_;
  backoff_ = BackoffFor::kNone;
  if (what == BackoffFor::kPlacement) {
    Place(&a);
  } else {
    StartTransferRetry(&a);
  }
  return a;
}

void GenerateFsm::StartTransferRetry(Actions* a) {
  if (!env_.workers->ReachDecode(decode_worker_.address)) {
    Fail(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      absl::StrCat("decode worker ", decode_worker_.address,
                                   " left the worker pool during a prefill retry")),
         a);
    return;
  }
  // Moves D's reservation to a new epoch first, so that nothing the failed
  // prefill worker still has in flight can land in the blocks.
  v1::RetryTransferRequest r;
  r.set_request_id(id_);
  r.set_transfer_id(prefill_.reserved().transfer_id());
  const int attempt = prefill_.BeginTransferRetry();
  a->start_transfer_retry =
      TransferRetryStart{attempt, placement_, decode_worker_.address, std::move(r)};
}

GenerateFsm::Actions GenerateFsm::OnTransferRetryDone(int attempt, uint64_t placement,
                                                      const grpc::Status& status,
                                                      uint64_t epoch) {
  Actions a;
  if (placement != placement_ || !prefill_.IsCurrentTransferRetry(attempt) || done()) return a;
  prefill_.EndTransferRetry();
  if (status.ok()) {
    prefill_.SetEpoch(epoch);
    StartPrefill(&a);
  } else {
    // The reservation no longer waits for KV: it committed after all (the
    // failed prefill worker's ack was lost), expired, or the decode worker
    // died. Its Decode stream, always open here and bounded by the KV
    // wait, tells which: tokens, an error, or a failover.
    LOG(INFO) << "[" << id_ << "] RetryTransfer on " << decode_worker_.address << ": "
              << StatusCodeName(status.error_code()) << ": " << status.error_message()
              << "; the decode stream decides";
  }
  return a;
}

void GenerateFsm::FallBackToLocalPrefill(const char* why, Actions* a) {
  // Give up the reservation and let a decode worker prefill the prompt
  // itself. Nothing was sent to the client but Started, so this is a fresh
  // placement.
  LOG(WARNING) << "[" << id_ << "] " << why << "; falling back to local prefill";
  local_fallback_why_ = why;
  if (decode_active_) {
    a->cancel_decode = decode_;
    release_wait_until_ = Now() + retry_.failover_wait;
    released_on_ = decode_worker_.address;
  }
  decode_active_ = false;
  reads_paused_ = false;
  Place(a);
}

void GenerateFsm::StopPrefillSide(Actions* a) {
  const PrefillAttempts::InFlight stopped = prefill_.Stop();
  if (stopped.prefill.has_value()) a->cancel_prefill = stopped.prefill;
  if (stopped.transfer_retry.has_value()) a->cancel_transfer_retry = stopped.transfer_retry;
  backoff_ = BackoffFor::kNone;
}

}  // namespace pdserve::router
