// GenerateCall's recovery transitions (see generate_call.h): the prefill
// retry under a new epoch while the decode worker keeps its reservation,
// and the decode failover that moves a request mid-stream.
#include <string>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"
#include "router/generate_call.h"
#include "router/routing_policy.h"
#include "router/worker_failure.h"
#include "router/worker_requests.h"

namespace pdserve::router {

void GenerateCall::StartPrefill(Actions* a) {
  std::shared_ptr<const RegistrySnapshot> snapshot = env_.registry->snapshot();
  PrefillQuery q;
  q.policy = env_.config->prefill_policy;
  q.prompt = request_.prompt_tokens;
  q.excluded = prefill_failed_;
  q.ticket = env_.prefill_ticket->fetch_add(1, std::memory_order_relaxed);
  q.now = absl::Now();
  if (env_.breaker != nullptr) q.ejected = env_.breaker->Ejected(q.now);
  absl::StatusOr<const WorkerState*> prefill = PickPrefill(*snapshot, decode_worker_, q);
  std::shared_ptr<v1::PrefillWorker::Stub> stub;
  if (prefill.ok()) stub = env_.registry->prefill_stub((*prefill)->address);
  if (!prefill.ok() || stub == nullptr) {
    // Incompatible prefill workers are an error, never a silent fallback.
    if (absl::IsFailedPrecondition(prefill.status())) {
      Fail(ToGrpcStatus(prefill.status()), a);
      return;
    }
    // None left (all failed this request, or all gone since placement).
    FallBackToLocalPrefill("no usable prefill worker left", a);
    return;
  }
  const std::string& address = (*prefill)->address;
  if (env_.metrics != nullptr) env_.metrics->CountRouting(RoutingTier::kPrefill, q.policy);
  v1::PrefillRequest r =
      MakePrefillRequest(id_, request_, reserved_, decode_worker_.info.kv_endpoint());
  // No deadline of its own: a long prompt takes as long as it takes while
  // the worker computes (the watchdog gives up on one that stops). It must
  // start within the same window, or the worker refuses it at once.
  r.set_start_within_ms(
      static_cast<uint32_t>(absl::ToInt64Milliseconds(retry_.prefill_attempt_timeout)));
  prefills_.push_back(std::make_unique<PrefillCall>(address, std::move(r), deadline_));
  prefill_started_ = absl::Now();
  prefill_progress_ = (*prefill)->load.prefill_progress();
  prefill_progress_at_ = prefill_started_;
  prefill_ = prefills_.back().get();
  prefill_in_flight_ = true;
  prefill_ok_ = false;
  ++holds_;
  a->start_prefill = prefill_;
  a->prefill_stub = std::move(stub);
  PushStarted(address);
  LOG(INFO) << "[" << id_ << "] prefill on " << address << " (epoch " << reserved_.epoch() << ")";
}

void GenerateCall::FallBackToLocalPrefill(const char* why, Actions* a) {
  // Give up the reservation and let a decode worker prefill the prompt
  // itself. Nothing was sent to the client but Started, so this is a fresh
  // placement.
  LOG(WARNING) << "[" << id_ << "] " << why << "; falling back to local prefill";
  local_fallback_why_ = why;
  if (decode_active_) {
    a->cancel_decode = decode_;
    release_wait_until_ = absl::Now() + retry_.failover_wait;
  }
  decode_active_ = false;
  read_paused_ = false;
  Place(a);
}

void GenerateCall::HandlePrefillFailure(const grpc::Status& status, Actions* a) {
  const std::string address = prefill_->address();
  if (decode_done_ || kv_committed_) {
    // The decode worker got the KV; only the prefill worker's report
    // (ack/metrics) was lost.
    LOG(WARNING) << "[" << id_ << "] prefill worker " << address
                 << " failed after its KV was committed: " << status.error_message();
    return;
  }
  const bool deadline_passed = std::chrono::system_clock::now() >= deadline_;
  if (IsWorkerHealthFailure(status)) RecordWorkerFailure(address, prefill_started_);
  if (decode_active_ && !deadline_passed && prefill_retries_ >= retry_.prefill_retries &&
      status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    // Busy prefill workers (their queues would not start the prompt in
    // time) are no reason to fail: the decode worker can prefill it.
    LOG(WARNING) << "[" << id_ << "] prefill worker " << address
                 << " refused: " << status.error_message() << "; retries used up";
    FallBackToLocalPrefill("no prefill worker could start the prompt in time", a);
    return;
  }
  if (!decode_active_ || prefill_retries_ >= retry_.prefill_retries ||
      !IsRetryableWorkerFailure(status, deadline_passed)) {
    grpc::Status failure = WorkerFailureStatus("prefill", address, status);
    if (prefill_retries_ > 0) {
      failure = grpc::Status(
          failure.error_code(),
          absl::StrCat(failure.error_message(), " (after ", prefill_retries_, " prefill retries)"));
    }
    Fail(failure, a);
    return;
  }
  ++prefill_retries_;
  prefill_failed_.push_back(address);
  absl::BitGen gen;
  const absl::Duration delay =
      RetryBackoff(retry_, prefill_retries_, absl::Uniform<double>(gen, 0, 1));
  LOG(WARNING) << "[" << id_ << "] prefill worker " << address << " failed ("
               << StatusCodeName(status.error_code()) << ": " << status.error_message()
               << "); retry " << prefill_retries_ << " of " << retry_.prefill_retries << " in "
               << absl::FormatDuration(delay);
  StartBackoff(delay, /*place=*/false, a);
}

void GenerateCall::StartBackoff(absl::Duration delay, bool place, Actions* a) {
  alarms_.push_back(std::make_unique<grpc::Alarm>());
  backoff_ = alarms_.back().get();
  backoff_places_ = place;
  ++holds_;
  a->start_backoff = backoff_;
  a->backoff_delay = delay;
  a->backoff_placement = placement_;
}

bool GenerateCall::WaitForDecodeWorker(const grpc::Status& placement_failure, Actions* a) {
  // Only a request whose decode worker failed waits (failover_wait_until_
  // is set then): a new request learns at once that no decode worker is
  // live. One that gave up its own reservation also waits for its blocks.
  const absl::Time next_poll = absl::Now() + retry_.failover_poll;
  const bool waits = (placement_failure.error_code() == grpc::StatusCode::UNAVAILABLE &&
                      next_poll < failover_wait_until_) ||
                     (placement_failure.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
                      next_poll < release_wait_until_);
  if (!waits || std::chrono::system_clock::now() >= deadline_) return false;
  VLOG(1) << "[" << id_
          << "] no decode worker to fail over to yet: " << placement_failure.error_message();
  attempts_.ForgetExclusions();
  StartBackoff(retry_.failover_poll, /*place=*/true, a);
  return true;
}

void GenerateCall::OnBackoffDone(uint64_t placement) {
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    if (placement == placement_ && backoff_ != nullptr && !terminal_) {
      backoff_ = nullptr;
      if (backoff_places_) {
        Place(&a);
      } else {
        StartTransferRetry(&a);
      }
    }
    Pump(&a);
  }
  Run(a);
  Release();
}

void GenerateCall::StartTransferRetry(Actions* a) {
  std::shared_ptr<v1::DecodeWorker::Stub> stub = env_.registry->decode_stub(decode_worker_.address);
  if (stub == nullptr) {
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
  r.set_transfer_id(reserved_.transfer_id());
  retries_.push_back(std::make_unique<TransferRetryCall>(std::move(r), deadline_));
  retry_in_flight_ = retries_.back().get();
  ++holds_;
  a->start_retry = retry_in_flight_;
  a->retry_stub = std::move(stub);
  a->retry_placement = placement_;
}

void GenerateCall::OnRetryTransferDone(uint64_t placement, TransferRetryCall* call,
                                       const grpc::Status& status) {
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    if (placement == placement_ && call == retry_in_flight_ && !terminal_) {
      retry_in_flight_ = nullptr;
      if (status.ok()) {
        reserved_.set_epoch(call->epoch());
        StartPrefill(&a);
      } else {
        // The reservation no longer waits for KV: it committed after all
        // (the failed prefill worker's ack was lost), expired, or the
        // decode worker died. Its Decode stream, always open here and
        // bounded by the KV wait, tells which: tokens, an error, or a
        // failover.
        LOG(INFO) << "[" << id_ << "] RetryTransfer on " << decode_worker_.address << ": "
                  << StatusCodeName(status.error_code()) << ": " << status.error_message()
                  << "; the decode stream decides";
      }
    }
    Pump(&a);
  }
  Run(a);
  Release();
}

bool GenerateCall::TryFailover(const grpc::Status& status, Actions* a) {
  const std::string address = decode_worker_.address;
  const bool deadline_passed = std::chrono::system_clock::now() >= deadline_;
  if (!IsRetryableDecodeFailure(status, deadline_passed)) return false;
  RecordWorkerFailure(address, decode_started_);
  if (relay_->ended()) {
    // Every token arrived; only DecodeFinished was lost. The request
    // completes, but the worker's failure stands (no RecordSuccess).
    decode_done_ = true;
    decode_broke_ = true;
    reason_ = relay_->completion_tokens() >= request_.max_tokens ? v1::FINISH_REASON_LENGTH
                                                                 : v1::FINISH_REASON_EOS;
    StopPrefillSide(a);
    MaybeComplete(a);
    return true;
  }
  if (failovers_ >= retry_.decode_failovers) {
    Fail(grpc::Status(
             grpc::StatusCode::UNAVAILABLE,
             absl::StrCat("decode worker ", address, " failed after ", relay_->completion_tokens(),
                          " tokens: ", StatusCodeName(status.error_code()), ": ",
                          status.error_message(), " (decode failover budget of ",
                          retry_.decode_failovers, " used up)")),
         a);
    return true;
  }
  ++failovers_;
  failover_wait_until_ = absl::Now() + retry_.failover_wait;
  LOG(WARNING) << "[" << id_ << "] decode worker " << address << " failed after "
               << relay_->completion_tokens() << " tokens (" << StatusCodeName(status.error_code())
               << ": " << status.error_message() << "); failover " << failovers_ << " of "
               << retry_.decode_failovers;
  StopPrefillSide(a);
  attempts_.RecordRefusal(address, status);
  Place(a);
  return true;
}

bool GenerateCall::TryLocalPrefillAfterKvWait(const grpc::Status& status, Actions* a) {
  // The decode worker ended the reservation because no KV frame came within
  // its wait: the prefill side stopped sending while the router still saw
  // it progress (or never reached it). Nothing but Started reached the
  // client (tokens come only after kv_committed_), so a local prefill is
  // the safety net; it needs no KV wait, so it cannot come back here.
  if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED || local_prefill_ ||
      kv_committed_ || std::chrono::system_clock::now() >= deadline_) {
    return false;
  }
  LOG(WARNING) << "[" << id_ << "] decode worker " << decode_worker_.address
               << " stopped waiting for the KV: " << status.error_message();
  StopPrefillSide(a);
  FallBackToLocalPrefill("the decode worker's KV wait expired", a);
  return true;
}

void GenerateCall::StopPrefillSide(Actions* a) {
  if (prefill_in_flight_) a->cancel_prefill = prefill_;
  prefill_in_flight_ = false;
  if (retry_in_flight_ != nullptr) a->cancel_retry = retry_in_flight_;
  retry_in_flight_ = nullptr;
  backoff_ = nullptr;
}

void GenerateCall::RecordWorkerFailure(const std::string& address, absl::Time attempt_started) {
  if (env_.breaker == nullptr) return;
  if (env_.breaker->RecordFailure(address, absl::Now(), attempt_started)) {
    LOG(WARNING) << "circuit breaker: ejecting worker " << address << " after repeated failures";
  }
}

}  // namespace pdserve::router
