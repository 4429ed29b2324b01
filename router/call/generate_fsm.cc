#include "router/call/generate_fsm.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"
#include "router/call/worker_failure.h"
#include "router/call/worker_requests.h"
#include "router/placement/placement_policy.h"

namespace pdserve::router {

absl::string_view GenerateFsm::StateName(State state) {
  switch (state) {
    case State::kAdmitted:
      return "ADMITTED";
    case State::kPlacing:
      return "PLACING";
    case State::kDecodeOpen:
      return "DECODE_OPEN";
    case State::kPrefilling:
      return "PREFILLING";
    case State::kStreaming:
      return "STREAMING";
    case State::kCompleting:
      return "COMPLETING";
    case State::kDone:
      return "DONE";
  }
  return "?";
}

GenerateFsm::GenerateFsm(Env env)
    : env_(std::move(env)),
      retry_(env_.config->retry_options()),
      timeline_(env_.clock->Now()) {}

GenerateFsm::Actions GenerateFsm::Start(const std::string& id,
                                        absl::StatusOr<ValidatedRequest> request,
                                        absl::Time deadline, absl::Time client_deadline) {
  Actions a;
  id_ = id;
  deadline_ = deadline;
  client_deadline_ = client_deadline;
  if (!request.ok()) {
    Fail(ToGrpcStatus(request.status()), &a);
    return a;
  }
  request_ = std::move(*request);
  relay_ = std::make_unique<TokenRelay>(
      *env_.tokenizer, TokenRelay::Options{.max_tokens = request_.max_tokens,
                                           .stop = request_.stop,
                                           .return_token_ids = request_.return_token_ids,
                                           .ignore_eos = request_.ignore_eos,
                                           .logprobs = request_.logprobs});
  LOG(INFO) << "[" << id_ << "] admitted: " << request_.prompt_tokens.size()
            << " prompt tokens, max_tokens " << request_.max_tokens;
  Place(&a);
  return a;
}

// ---------------------------------------------------------------------------
// Placement

// Placement loops: a decode worker that cannot take this request after all
// (a migration's KV layout differs, or it left the pool since the
// snapshot) counts as a refusal, and the next query skips it.
void GenerateFsm::Place(Actions* a) {
  state_ = State::kPlacing;
  // After a decode failover the new worker continues from the tokens the
  // client already has: it prefills prompt + those tokens itself. A
  // migration target receives the KV of all of them but the last, which
  // comes with the commit.
  std::vector<int32_t> generated = relay_->generated_ids();
  if (migration_.active()) generated.pop_back();
  for (;;) {
    const absl::Time now = Now();
    const PlacementQuery q = MakePlacementQuery(generated, now);
    // The placement points into the view: it lives until the commit.
    const std::shared_ptr<const RegistrySnapshot> view = LedgerView();
    absl::StatusOr<Placement> placement = PlaceRequest(*view, q);
    if (!placement.ok()) {
      HandleNoPlacement(placement.status(), a);
      return;
    }
    if (migration_.active() && !migration_.FitsTarget(placement->decode->info.kv_layout())) {
      refusals_.RecordRefusal(placement->decode->address,
                              grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                           "its KV layout differs from the migrating stream's"));
      continue;
    }
    if (!env_.workers->ReachDecode(placement->decode->address)) {
      // It left the pool (DNS) after the snapshot was taken: place again
      // without it, as if it had refused.
      refusals_.RecordRefusal(placement->decode->address,
                              grpc::Status(grpc::StatusCode::UNAVAILABLE, "left the worker pool"));
      continue;
    }
    CommitPlacement(*placement, q, generated, now, a);
    return;
  }
}

PlacementQuery GenerateFsm::MakePlacementQuery(const std::vector<int32_t>& generated,
                                               absl::Time now) const {
  const RouterConfig& config = *env_.config;
  PlacementQuery q;
  q.decode.policy = config.decode_policy;
  q.decode.prompt_tokens = static_cast<int32_t>(request_.prompt_tokens.size() + generated.size());
  q.decode.max_tokens = request_.max_tokens - static_cast<int32_t>(generated.size());
  q.decode.prompt = request_.prompt_tokens;
  q.decode.model_fingerprint = env_.model_fingerprint;
  q.decode.excluded = refusals_.excluded();
  if (env_.breaker != nullptr) q.decode.ejected = env_.breaker->Ejected(now);
  q.decode.ticket = env_.decode_ticket->fetch_add(1, std::memory_order_relaxed);
  q.decode.now = now;
  q.prefill.policy = config.prefill_policy;
  q.prefill.prompt = request_.prompt_tokens;
  q.prefill.ticket = env_.prefill_ticket->load(std::memory_order_relaxed);
  q.prefill.ejected = q.decode.ejected;
  q.prefill.now = now;
  const bool fell_back = local_fallback_why_ != nullptr;
  q.colocated = config.colocated || !generated.empty() || fell_back || migration_.active();
  if (!config.colocated && fell_back) {
    q.forced_why = local_fallback_why_;
    q.forced_reason = "prefill_fallback";
  } else if (!config.colocated) {
    q.forced_why = "a decode failover";
  }
  q.local_prefill_max_tokens = config.local_prefill_max_tokens;
  q.prefill_saturation_tokens = config.prefill_saturation_tokens;
  return q;
}

// What this router placed since each worker's last report counts too.
std::shared_ptr<const RegistrySnapshot> GenerateFsm::LedgerView() const {
  std::shared_ptr<const RegistrySnapshot> snapshot = env_.workers->snapshot();
  if (env_.ledger == nullptr) return snapshot;
  auto adjusted = std::make_shared<RegistrySnapshot>(*snapshot);
  env_.ledger->Apply(adjusted.get());
  return adjusted;
}

void GenerateFsm::HandleNoPlacement(const absl::Status& status, Actions* a) {
  if (migration_.active()) {
    RecomputeAfterFailedMigration(
        absl::StrCat("no decode worker can take its KV: ", status.message()), a);
    return;
  }
  const grpc::Status failure = refusals_.PlacementFailure(status);
  if (WaitForDecodeWorker(failure, a)) return;
  Fail(failure, a);
}

void GenerateFsm::CommitPlacement(const Placement& placement, const PlacementQuery& q,
                                  const std::vector<int32_t>& generated, absl::Time now,
                                  Actions* a) {
  ++placement_;
  if (env_.metrics != nullptr) {
    env_.metrics->CountRouting(RoutingTier::kDecode, q.decode.policy);
    // A migration target prefills nothing.
    if (!migration_.active()) {
      env_.metrics->CountPrefillDecision(placement.local_prefill, placement.reason);
    }
  }
  decode_worker_ = *placement.decode;
  // A migration target's KV comes from the source, as from a prefill worker.
  local_prefill_ = placement.local_prefill && !migration_.active();
  decode_started_ = now;
  if (env_.ledger != nullptr) {
    const int64_t block = std::max(decode_worker_.info.kv_layout().block_size(), 1u);
    const int64_t tokens = int64_t{q.decode.prompt_tokens} + q.decode.max_tokens;
    env_.ledger->Record(decode_worker_.address, decode_worker_.last_report,
                        (tokens + block - 1) / block);
  }
  kv_committed_ = false;
  migration_.NewDecodeAttempt();
  prefill_.ForgetSuccess();
  v1::DecodeRequest r =
      MakeDecodeRequest(id_, request_, local_prefill_, env_.config->kv_wait_ms, generated,
                        env_.config->decode_migration, /*migrated=*/migration_.active());
  decode_ = decode_attempts_++;
  decode_active_ = true;
  state_ = State::kDecodeOpen;
  timeline_.MarkDecodeAsked(Now());
  a->start_decode = DecodeStart{decode_, decode_worker_.address, std::move(r)};
  last_decode_event_ = Now();
  ArmWatchdog(a);
  LOG(INFO) << "[" << id_ << "] decode worker " << decode_worker_.address << ", "
            << (local_prefill_ ? "local" : "remote") << " prefill ("
            << (migration_.active()  ? "the target of a migration"
                : generated.empty() ? placement.why
                                    : "continuing after a decode failover")
            << (generated.empty() ? "" : absl::StrCat(", from token ", generated.size())) << ")";
}

bool GenerateFsm::WaitForDecodeWorker(const grpc::Status& placement_failure, Actions* a) {
  // Only a request whose decode worker failed waits (failover_wait_until_
  // is set then): a new request learns at once that no decode worker is
  // live. One that gave up its own reservation also waits for its blocks.
  const absl::Time next_poll = Now() + retry_.failover_poll;
  const bool waits = (placement_failure.error_code() == grpc::StatusCode::UNAVAILABLE &&
                      next_poll < failover_wait_until_) ||
                     (placement_failure.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
                      next_poll < release_wait_until_);
  if (!waits || DeadlinePassed()) return false;
  VLOG(1) << "[" << id_
          << "] no decode worker to fail over to yet: " << placement_failure.error_message();
  refusals_.ForgetExclusions();
  StartBackoff(retry_.failover_poll, /*place=*/true, a);
  return true;
}

// ---------------------------------------------------------------------------
// Decode events

GenerateFsm::Actions GenerateFsm::OnDecodeEvent(int attempt, const v1::DecodeEvent& event) {
  Actions a;
  // An attempt given up (watchdog, fall-back) may still deliver events
  // while the request waits for a new placement: they are not its own.
  if (!IsCurrentDecode(attempt)) return a;
  last_decode_event_ = Now();
  if (state_ != State::kDecodeOpen && state_ != State::kPrefilling &&
      state_ != State::kStreaming) {
    return a;
  }
  switch (event.event_case()) {
    case v1::DecodeEvent::kReserved:
      HandleReserved(event.reserved(), &a);
      break;
    case v1::DecodeEvent::kTokens:
      HandleTokens(event.tokens(), &a);
      break;
    case v1::DecodeEvent::kFinished:
      HandleFinished(event.finished(), &a);
      break;
    case v1::DecodeEvent::kMigrating:
      HandleMigrating(event.migrating(), &a);
      break;
    case v1::DecodeEvent::EVENT_NOT_SET:
      FailProtocol("sent an empty event", &a);
      break;
  }
  return a;
}

bool GenerateFsm::AcceptFirstEvent(bool reserved, Actions* a) {
  if (state_ != State::kDecodeOpen) {
    if (!reserved) return true;
    FailProtocol("reserved twice", a);
    return false;
  }
  if (reserved == local_prefill_) {
    FailProtocol(
        reserved ? "reserved KV for a local-prefill request" : "sent output before reserving KV",
        a);
    return false;
  }
  state_ = reserved ? State::kPrefilling : State::kStreaming;
  // Local requests announce themselves with their first output, remote ones
  // once their prefill worker is chosen (StartPrefill).
  if (local_prefill_) PushStarted("", a);
  return true;
}

void GenerateFsm::HandleReserved(const v1::Reserved& reserved, Actions* a) {
  if (!AcceptFirstEvent(/*reserved=*/true, a)) return;
  if (migration_.active()) {
    StartHandoff(reserved, a);
    return;
  }
  timeline_.MarkReserved(Now());
  cached_prefix_tokens_ = reserved.cached_prefix_tokens();
  prefill_.Reserve(reserved);
  LOG(INFO) << "[" << id_ << "] reserved on " << decode_worker_.address << " (transfer "
            << reserved.transfer_id() << ", epoch " << reserved.epoch() << ", "
            << reserved.cached_prefix_tokens() << " cached tokens)";
  StartPrefill(a);
}

void GenerateFsm::HandleTokens(const v1::Tokens& tokens, Actions* a) {
  if (!AcceptFirstEvent(/*reserved=*/false, a)) return;
  // Tokens on a remote attempt mean its KV arrived: a prefill failure from
  // now on only loses the prefill worker's report.
  kv_committed_ = true;
  if (migration_.active()) {
    // The target continues where the source stopped: the move is done.
    if (env_.metrics != nullptr) env_.metrics->CountMigration(/*moved=*/true);
    LOG(INFO) << "[" << id_ << "] migrated from " << migration_.offer().source_address << " to "
              << decode_worker_.address << " after " << migration_.offer().generated << " tokens";
    a->cancel_source = migration_.Complete();
  }
  // The KV is in: a transfer retry still waiting out its backoff would only
  // ask D to move a committed reservation to a new epoch.
  if (backoff_ == BackoffFor::kTransferRetry) backoff_ = BackoffFor::kNone;
  state_ = State::kStreaming;
  timeline_.MarkTokens(Now(), tokens.ids_size());
  absl::StatusOr<TokenRelay::Output> out = relay_->Push(tokens);
  if (!out.ok()) {
    FailProtocol(out.status().message(), a);
    return;
  }
  if (out->has_chunk) PushChunk(std::move(out->chunk), a);
  if (!out->stopped) MaybeRebalance(a);
  if (out->stopped) {
    LOG(INFO) << "[" << id_ << "] stop string matched after " << relay_->completion_tokens()
              << " tokens; cancelling the decode stream";
    state_ = State::kCompleting;
    reason_ = v1::FINISH_REASON_STOP;
    if (decode_active_) a->cancel_decode = decode_;
    MaybeComplete(a);
  }
}

void GenerateFsm::HandleFinished(const v1::DecodeFinished& finished, Actions* a) {
  if (!AcceptFirstEvent(/*reserved=*/false, a)) return;
  decode_finished_ = finished;
  state_ = State::kCompleting;
  reason_ = finished.reason();
  MaybeComplete(a);
}

GenerateFsm::Actions GenerateFsm::OnDecodeDone(int attempt, const grpc::Status& status) {
  Actions a;
  // The end of an attempt already given up was handled when it was.
  if (!IsCurrentDecode(attempt)) return a;
  decode_active_ = false;
  reads_paused_ = false;
  if (!done()) HandleDecodeEnd(status, &a);
  return a;
}

void GenerateFsm::HandleDecodeEnd(const grpc::Status& status, Actions* a) {
  const std::string address = decode_worker_.address;
  if (state_ == State::kCompleting) {
    MaybeComplete(a);
    return;
  }
  // Nothing was produced yet, so another decode worker can take the request
  // as if it had been placed there first.
  if (state_ == State::kDecodeOpen && DecodeAttempts::IsRetryable(status)) {
    LOG(INFO) << "[" << id_ << "] decode worker " << address
              << " refused: " << status.error_message() << "; trying another";
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      // It died before answering: as in a failover, give its replacement
      // a moment to become live.
      RecordWorkerFailure(address, decode_started_);
      if (failover_wait_until_ == absl::Time()) {
        failover_wait_until_ = Now() + retry_.failover_wait;
      }
    }
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED && address == released_on_ &&
        !release_wait_extended_) {
      // The worker that holds our given-up reservation is short of blocks.
      // It frees them between engine steps, and a step with a long prefill
      // chunk on a CPU lasts seconds: its refusal can come after the first
      // window, before our blocks are back. Poll it for one more window
      // from now; a pool that is really full then refuses again.
      release_wait_until_ = std::max(release_wait_until_, Now() + retry_.failover_wait);
      release_wait_extended_ = true;
    }
    refusals_.RecordRefusal(address, status);
    Place(a);
    return;
  }
  if (migration_.active()) {
    if (IsWorkerHealthFailure(status)) RecordWorkerFailure(address, decode_started_);
    refusals_.RecordRefusal(address, status);
    RecomputeAfterFailedMigration(
        absl::StrCat("migration target ", address, " failed: ", status.error_message()), a);
    return;
  }
  if (status.ok()) {
    FailProtocol("ended the stream without DecodeFinished", a);
    return;
  }
  if (TryFailover(status, a)) return;
  if (TryLocalPrefillAfterKvWait(status, a)) return;
  // Our own deadline (client's or --request_timeout_ms) is reported as such;
  // a worker-side timeout (e.g. the KV never arrived) keeps its message.
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && DeadlinePassed()) {
    Fail(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                      absl::StrCat("deadline exceeded after ",
                                   absl::FormatDuration(timeline_.Elapsed(Now())),
                                   " waiting for decode worker ", address, " (",
                                   relay_->completion_tokens(), " tokens generated)")),
         a);
    return;
  }
  Fail(WorkerFailureStatus("decode", address, status), a);
}

bool GenerateFsm::TryFailover(const grpc::Status& status, Actions* a) {
  const std::string address = decode_worker_.address;
  if (!IsRetryableDecodeFailure(status, DeadlinePassed())) return false;
  RecordWorkerFailure(address, decode_started_);
  if (relay_->ended()) {
    // Every token arrived; only DecodeFinished was lost. The request
    // completes, but the worker's failure stands (no RecordSuccess).
    state_ = State::kCompleting;
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
  failover_wait_until_ = Now() + retry_.failover_wait;
  LOG(WARNING) << "[" << id_ << "] decode worker " << address << " failed after "
               << relay_->completion_tokens() << " tokens (" << StatusCodeName(status.error_code())
               << ": " << status.error_message() << "); failover " << failovers_ << " of "
               << retry_.decode_failovers;
  StopPrefillSide(a);
  refusals_.RecordRefusal(address, status);
  Place(a);
  return true;
}

bool GenerateFsm::TryLocalPrefillAfterKvWait(const grpc::Status& status, Actions* a) {
  // The decode worker ended the reservation because no KV frame came within
  // its wait: the prefill side stopped sending while the router still saw
  // it progress (or never reached it). Nothing but Started reached the
  // client (tokens come only after kv_committed_), so a local prefill is
  // the safety net; it needs no KV wait, so it cannot come back here.
  if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED || local_prefill_ ||
      kv_committed_ || DeadlinePassed()) {
    return false;
  }
  LOG(WARNING) << "[" << id_ << "] decode worker " << decode_worker_.address
               << " stopped waiting for the KV: " << status.error_message();
  StopPrefillSide(a);
  FallBackToLocalPrefill("the decode worker's KV wait expired", a);
  return true;
}

// ---------------------------------------------------------------------------
// Watchdog

void GenerateFsm::ArmWatchdog(Actions* a) {
  if (watchdog_.armed() || done()) return;
  const absl::Duration delay =
      Watchdog::Delay(env_.workers->snapshot()->stale_after, retry_.prefill_attempt_timeout,
                      /*kv_pending=*/!local_prefill_ && !kv_committed_);
  watchdog_.Arm(Now(), delay);
  a->arm_watchdog = delay;
}

GenerateFsm::Actions GenerateFsm::OnWatchdog(bool fired) {
  Actions a;
  watchdog_.Disarm();
  if (!fired || done()) return a;
  // A timer this late means the router itself was stalled (stopped,
  // starved of CPU, a paused VM): the workers' streams and reports were not
  // read either, so their silence says nothing this time.
  const absl::Duration late = watchdog_.Lateness(Now());
  if (late > env_.workers->snapshot()->stale_after / 2) {
    LOG(WARNING) << "[" << id_ << "] watchdog ran "
                 << absl::FormatDuration(absl::Trunc(late, absl::Milliseconds(1)))
                 << " late: the router was stalled; not judging worker silence this round";
  } else {
    CheckPrefillSilence(&a);
    if (!done()) CheckDecodeSilence(&a);
  }
  if (!done() && decode_active_) ArmWatchdog(&a);
  return a;
}

void GenerateFsm::CheckPrefillSilence(Actions* a) {
  if (!prefill_.in_flight() || kv_committed_) return;
  const absl::Time now = Now();
  const std::shared_ptr<const RegistrySnapshot> snapshot = env_.workers->snapshot();
  grpc::Status silence = Watchdog::PrefillSilence(*snapshot, prefill_.address(), now);
  if (silence.ok()) {
    silence = prefill_.Stall(snapshot->FindPrefill(prefill_.address()),
                             retry_.prefill_attempt_timeout, now);
  }
  if (silence.ok()) return;
  LOG(WARNING) << "[" << id_ << "] " << silence.error_message() << "; abandoning its prefill";
  a->cancel_prefill = prefill_.current();
  prefill_.Abandon();
  HandlePrefillFailure(silence, a);  // retries on another prefill worker, or fails
  MaybeComplete(a);
}

void GenerateFsm::CheckDecodeSilence(Actions* a) {
  if (!decode_active_) return;
  const grpc::Status silence =
      Watchdog::DecodeSilence(*env_.workers->snapshot(), decode_worker_.address,
                              last_decode_event_, reads_paused_, Now());
  if (silence.ok()) return;
  LOG(WARNING) << "[" << id_ << "] " << silence.error_message() << "; abandoning its stream";
  a->cancel_decode = decode_;
  decode_active_ = false;
  HandleDecodeEnd(silence, a);  // fails over, or fails the request
}

// ---------------------------------------------------------------------------
// The client

GenerateFsm::Actions GenerateFsm::OnClientCancel() {
  Actions a;
  client_gone_ = true;
  // The client's own deadline timer fires a moment before ours (its
  // deadline reached us as a timeout, measured from our receive time): a
  // cancel that close to the deadline is the deadline.
  const bool expired = client_deadline_ <= Now() + absl::Milliseconds(50);
  Fail(expired ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "client deadline exceeded")
               : grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled"),
       &a);
  return a;
}

GenerateFsm::Actions GenerateFsm::OnClientWriteFailed() {
  Actions a;
  client_gone_ = true;
  Fail(grpc::Status(grpc::StatusCode::CANCELLED, "client stream closed"), &a);
  return a;
}

GenerateFsm::Actions GenerateFsm::OnClientDrained() {
  Actions a;
  if (!reads_paused_) return a;
  reads_paused_ = false;
  if (decode_active_) a.resume_decode = decode_;
  return a;
}

// ---------------------------------------------------------------------------
// The outcome

void GenerateFsm::RecordWorkerFailure(const std::string& address, absl::Time attempt_started) {
  if (env_.breaker == nullptr) return;
  if (env_.breaker->RecordFailure(address, Now(), attempt_started)) {
    LOG(WARNING) << "circuit breaker: ejecting worker " << address << " after repeated failures";
  }
}

// The decode worker's prefix-cache hit on the prompt: announced in Reserved
// when the KV comes from a prefill worker, reported at the end when the
// decode worker prefilled itself. A failover's prompt includes the tokens
// generated before it, which are not the client's prompt.
int32_t GenerateFsm::CachedPromptTokens() const {
  if (!local_prefill_) return static_cast<int32_t>(cached_prefix_tokens_);
  return static_cast<int32_t>(std::min<size_t>(decode_finished_.timings().prefill_cached_tokens(),
                                               request_.prompt_tokens.size()));
}

v1::Placement GenerateFsm::FinalPlacement() const {
  v1::Placement p;
  p.set_decode_worker(decode_worker_.address);
  if (!local_prefill_ && prefill_.calls() > 0) p.set_prefill_worker(prefill_.address());
  p.set_prefill_attempts(static_cast<uint32_t>(prefill_.calls()));
  p.set_decode_failovers(static_cast<uint32_t>(failovers_));
  p.set_decode_migrations(static_cast<uint32_t>(migration_.moves()));
  return p;
}

void GenerateFsm::MaybeComplete(Actions* a) {
  if (state_ != State::kCompleting || prefill_.in_flight()) return;
  TokenRelay::Output tail = relay_->Flush();
  if (tail.stopped) reason_ = v1::FINISH_REASON_STOP;
  if (tail.has_chunk) PushChunk(std::move(tail.chunk), a);
  v1::GenerateResponse response;
  v1::Finished* finished = response.mutable_finished();
  finished->set_reason(reason_);
  finished->mutable_usage()->set_prompt_tokens(static_cast<int32_t>(request_.prompt_tokens.size()));
  finished->mutable_usage()->set_completion_tokens(relay_->completion_tokens());
  finished->mutable_usage()->set_cached_prompt_tokens(CachedPromptTokens());
  // A moved stream's prompt was prefilled where it started.
  *finished->mutable_timings() =
      timeline_.Merge(decode_finished_.timings(), prefill_.response(),
                      prefilled_locally_.value_or(local_prefill_), Now());
  *finished->mutable_placement() = FinalPlacement();
  if (env_.breaker != nullptr && !decode_broke_) {
    env_.breaker->RecordSuccess(decode_worker_.address);
  }
  LOG(INFO) << "[" << id_ << "] finished: " << v1::FinishReason_Name(reason_) << ", "
            << relay_->completion_tokens() << " tokens, ttft " << finished->timings().ttft_ms()
            << " ms, e2e " << finished->timings().e2e_ms() << " ms";
  if (env_.metrics != nullptr) {
    env_.metrics->ObserveFinished(finished->timings(), relay_->completion_tokens(),
                                  timeline_.inter_token_seconds(), env_.api);
    env_.metrics->CountRequest(grpc::StatusCode::OK, env_.api);
  }
  a->responses.push_back(std::move(response));
  state_ = State::kDone;
  a->outcome = grpc::Status::OK;
}

void GenerateFsm::Fail(const grpc::Status& status, Actions* a) {
  if (done()) return;
  state_ = State::kDone;
  a->outcome = status;
  if (env_.metrics != nullptr) env_.metrics->CountRequest(status.error_code(), env_.api);
  // Problems the client caused are routine; the rest deserve attention.
  const grpc::StatusCode code = status.error_code();
  const bool routine = code == grpc::StatusCode::INVALID_ARGUMENT ||
                       code == grpc::StatusCode::OUT_OF_RANGE ||
                       code == grpc::StatusCode::CANCELLED || client_gone_;
  LOG_IF(INFO, routine) << "[" << id_ << "] " << StatusCodeName(code) << ": "
                        << status.error_message();
  LOG_IF(WARNING, !routine) << "[" << id_ << "] " << StatusCodeName(code) << ": "
                            << status.error_message();
  if (decode_active_) a->cancel_decode = decode_;
  AbandonMigration(a);
  StopPrefillSide(a);
}

void GenerateFsm::FailProtocol(absl::string_view what, Actions* a) {
  Fail(grpc::Status(grpc::StatusCode::INTERNAL,
                    absl::StrCat("decode worker ", decode_worker_.address, " ", what)),
       a);
}

void GenerateFsm::PushStarted(const std::string& prefill_worker, Actions* a) {
  // A retried prefill or a failover keeps the client's one Started.
  if (started_sent_) return;
  started_sent_ = true;
  v1::GenerateResponse response;
  v1::Started* started = response.mutable_started();
  started->set_request_id(id_);
  started->set_prompt_tokens(static_cast<int32_t>(request_.prompt_tokens.size()));
  started->set_decode_worker(decode_worker_.address);
  started->set_prefill_worker(prefill_worker);
  a->responses.push_back(std::move(response));
}

void GenerateFsm::PushChunk(v1::Chunk chunk, Actions* a) {
  v1::GenerateResponse response;
  *response.mutable_chunk() = std::move(chunk);
  a->responses.push_back(std::move(response));
}

}  // namespace pdserve::router
