#include "router/generate_fsm.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"
#include "router/routing_policy.h"
#include "router/worker_failure.h"
#include "router/worker_requests.h"

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

void GenerateFsm::Place(Actions* a) {
  state_ = State::kPlacing;
  std::shared_ptr<const RegistrySnapshot> snapshot = env_.workers->snapshot();
  // After a decode failover the new worker continues from the tokens the
  // client already has: it prefills prompt + those tokens itself. A
  // migration target receives the KV of all of them but the last, which
  // comes with the commit.
  std::vector<int32_t> generated = relay_->generated_ids();
  if (migration_.has_value()) generated.pop_back();
  const absl::Time now = Now();
  PlacementQuery q;
  q.decode.policy = env_.config->decode_policy;
  q.decode.prompt_tokens = static_cast<int32_t>(request_.prompt_tokens.size() + generated.size());
  q.decode.max_tokens = request_.max_tokens - static_cast<int32_t>(generated.size());
  q.decode.prompt = request_.prompt_tokens;
  q.decode.model_fingerprint = env_.model_fingerprint;
  q.decode.excluded = refusals_.excluded();
  if (env_.breaker != nullptr) q.decode.ejected = env_.breaker->Ejected(now);
  q.decode.ticket = env_.decode_ticket->fetch_add(1, std::memory_order_relaxed);
  q.decode.now = now;
  q.prefill.policy = env_.config->prefill_policy;
  q.prefill.prompt = request_.prompt_tokens;
  q.prefill.ticket = env_.prefill_ticket->load(std::memory_order_relaxed);
  q.prefill.ejected = q.decode.ejected;
  q.prefill.now = now;
  const bool fell_back = local_fallback_why_ != nullptr;
  q.colocated = env_.config->colocated || !generated.empty() || fell_back || migration_.has_value();
  if (!env_.config->colocated && fell_back) {
    q.forced_why = local_fallback_why_;
    q.forced_reason = "prefill_fallback";
  } else if (!env_.config->colocated) {
    q.forced_why = "a decode failover";
  }
  q.local_prefill_max_tokens = env_.config->local_prefill_max_tokens;
  q.prefill_saturation_tokens = env_.config->prefill_saturation_tokens;
  // What this router placed since each worker's last report counts too.
  RegistrySnapshot adjusted;
  const RegistrySnapshot* view = snapshot.get();
  if (env_.ledger != nullptr) {
    adjusted = *snapshot;
    env_.ledger->Apply(&adjusted);
    view = &adjusted;
  }
  absl::StatusOr<Placement> placement = PlaceRequest(*view, q);
  if (!placement.ok() && migration_.has_value()) {
    RecomputeAfterFailedMigration(
        absl::StrCat("no decode worker can take its KV: ", placement.status().message()), a);
    return;
  }
  if (placement.ok() && migration_.has_value() &&
      placement->decode->info.kv_layout().SerializeAsString() !=
          migration_->layout.SerializeAsString()) {
    refusals_.RecordRefusal(placement->decode->address,
                            grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                         "its KV layout differs from the migrating stream's"));
    Place(a);
    return;
  }
  if (!placement.ok()) {
    const grpc::Status failure = refusals_.PlacementFailure(placement.status());
    if (WaitForDecodeWorker(failure, a)) return;
    Fail(failure, a);
    return;
  }
  if (!env_.workers->ReachDecode(placement->decode->address)) {
    // It left the pool (DNS) after the snapshot was taken: place again
    // without it, as if it had refused.
    refusals_.RecordRefusal(placement->decode->address,
                            grpc::Status(grpc::StatusCode::UNAVAILABLE, "left the worker pool"));
    Place(a);
    return;
  }
  ++placement_;
  if (env_.metrics != nullptr) {
    env_.metrics->CountRouting(RoutingTier::kDecode, q.decode.policy);
    // A migration target prefills nothing.
    if (!migration_.has_value()) {
      env_.metrics->CountPrefillDecision(placement->local_prefill, placement->reason);
    }
  }
  decode_worker_ = *placement->decode;
  // A migration target's KV comes from the source, as from a prefill worker.
  local_prefill_ = placement->local_prefill && !migration_.has_value();
  decode_started_ = now;
  if (env_.ledger != nullptr) {
    const int64_t block = std::max(decode_worker_.info.kv_layout().block_size(), 1u);
    const int64_t tokens = int64_t{q.decode.prompt_tokens} + q.decode.max_tokens;
    env_.ledger->Record(decode_worker_.address, decode_worker_.last_report,
                        (tokens + block - 1) / block);
  }
  kv_committed_ = false;
  offer_asked_ = false;
  prefill_.ForgetSuccess();
  v1::DecodeRequest r =
      MakeDecodeRequest(id_, request_, local_prefill_, env_.config->kv_wait_ms, generated,
                        env_.config->decode_migration, /*migrated=*/migration_.has_value());
  decode_ = decode_attempts_++;
  decode_active_ = true;
  state_ = State::kDecodeOpen;
  timeline_.MarkDecodeAsked(Now());
  a->start_decode = DecodeStart{decode_, decode_worker_.address, std::move(r)};
  last_decode_event_ = Now();
  ArmWatchdog(a);
  LOG(INFO) << "[" << id_ << "] decode worker " << decode_worker_.address << ", "
            << (local_prefill_ ? "local" : "remote") << " prefill ("
            << (migration_.has_value() ? "the target of a migration"
                : generated.empty()    ? placement->why
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
  if (migration_.has_value()) {
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
  if (migration_.has_value()) {
    // The target continues where the source stopped: the move is done.
    ++migrations_;
    if (env_.metrics != nullptr) env_.metrics->CountMigration(/*moved=*/true);
    LOG(INFO) << "[" << id_ << "] migrated from " << migration_->source_address << " to "
              << decode_worker_.address << " after " << migration_->generated << " tokens";
    a->cancel_source = migration_->source;
    migration_.reset();
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
  if (migration_.has_value()) {
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
// KV migration

void GenerateFsm::HandleMigrating(const v1::Migrating& migrating, Actions* a) {
  const std::string address = decode_worker_.address;
  const int32_t generated = static_cast<int32_t>(relay_->generated_ids().size());
  // Anything else is left to the stream's end (the offer lapses there):
  // the failover recomputes.
  if (state_ != State::kStreaming || migration_.has_value() || !env_.config->decode_migration ||
      generated < 1 || relay_->ended()) {
    return;
  }
  if (migrating.generated_tokens() != generated) {
    LOG(WARNING) << "[" << id_ << "] decode worker " << address << " offered the stream after "
                 << migrating.generated_tokens() << " tokens, but " << generated
                 << " were relayed; not moving it";
    return;
  }
  LOG(INFO) << "[" << id_ << "] decode worker " << address
            << " offers the stream: moving it with its KV after " << generated << " tokens";
  migration_ = Migration{decode_, address, decode_worker_.info.kv_layout(), generated,
                         migrating.offer_id()};
  if (!prefilled_locally_.has_value()) prefilled_locally_ = local_prefill_;
  // The source's stream stays open (its worker holds the KV for the
  // Handoff) but is no longer read.
  decode_active_ = false;
  reads_paused_ = false;
  refusals_.RecordRefusal(address, grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                                "the stream is moving off this worker"));
  // A recompute after a failed move waits for a decode worker like a
  // failover.
  failover_wait_until_ = Now() + retry_.failover_wait;
  StopPrefillSide(a);  // a Prefill call still out only reports
  Place(a);
}

namespace {

// A stream needs this many tokens still to go to be worth moving.
constexpr int32_t kRebalanceMinTokensLeft = 64;

// Of the worker's KV pool, the share in use once `extra_blocks` more are.
double KvUtilization(const v1::LoadReport& load, int64_t extra_blocks = 0) {
  if (load.kv_blocks_total() == 0) return 0;
  const int64_t used = int64_t{load.kv_blocks_total()} - load.kv_blocks_free() + extra_blocks;
  return static_cast<double>(used) / load.kv_blocks_total();
}

}  // namespace

void GenerateFsm::MaybeRebalance(Actions* a) {
  const double threshold = env_.config->rebalance_kv_utilization;
  // A move that fails is recomputed as a failover: only with budget left,
  // so that a voluntary move can never fail the request.
  if (threshold <= 0 || env_.rebalance == nullptr || !env_.config->decode_migration ||
      state_ != State::kStreaming || !decode_active_ || migration_.has_value() || offer_asked_ ||
      failovers_ >= retry_.decode_failovers) {
    return;
  }
  const int32_t generated = static_cast<int32_t>(relay_->generated_ids().size());
  if (request_.max_tokens - generated < kRebalanceMinTokensLeft) return;
  const std::shared_ptr<const RegistrySnapshot> snapshot = env_.workers->snapshot();
  const WorkerState* here = snapshot->FindDecode(decode_worker_.address);
  if (here == nullptr || KvUtilization(here->load) < threshold) return;
  const int64_t block = std::max(here->info.kv_layout().block_size(), 1u);
  const int64_t blocks =
      (static_cast<int64_t>(request_.prompt_tokens.size()) + request_.max_tokens + block - 1) /
      block;
  const std::string layout = here->info.kv_layout().SerializeAsString();
  // Room: below the threshold even with this stream, so that it does not
  // move back (nor on to a third worker) on the next report.
  const bool room = std::any_of(
      snapshot->decode.begin(), snapshot->decode.end(), [&](const WorkerState& w) {
        return w.address != here->address && w.live && w.has_info && !w.load.draining() &&
               w.info.model_fingerprint() == env_.model_fingerprint &&
               w.info.kv_layout().SerializeAsString() == layout &&
               w.load.kv_blocks_free() >= blocks && KvUtilization(w.load, blocks) < threshold;
      });
  if (!room || !env_.rebalance->TryStart(here->address, Now())) return;
  offer_asked_ = true;
  a->offer_migration = decode_;
  LOG(INFO) << "[" << id_ << "] decode worker " << here->address << " is "
            << static_cast<int>(KvUtilization(here->load) * 100)
            << "% full: asking it to move this stream elsewhere";
}

GenerateFsm::Actions GenerateFsm::OnOfferMigrationDone(int attempt, const grpc::Status& status) {
  Actions a;
  // Its Migrating event, if it offered, comes on the stream; a refusal
  // (the stream ended meanwhile, an older worker) changes nothing.
  if (!status.ok() && !done()) {
    LOG(INFO) << "[" << id_ << "] the decode worker of attempt " << attempt
              << " did not offer the stream: " << StatusCodeName(status.error_code()) << ": "
              << status.error_message();
  }
  return a;
}

void GenerateFsm::StartHandoff(const v1::Reserved& reserved, Actions* a) {
  timeline_.MarkReserved(Now());
  migration_->handoff = handoff_attempts_++;
  a->start_handoff = HandoffStart{
      migration_->handoff, migration_->source,
      MakeHandoffRequest(id_, migration_->offer_id, reserved, decode_worker_.info.kv_endpoint())};
  LOG(INFO) << "[" << id_ << "] reserved on " << decode_worker_.address << " (transfer "
            << reserved.transfer_id() << ", " << reserved.cached_prefix_tokens()
            << " cached tokens): " << migration_->source_address << " hands the KV over";
}

GenerateFsm::Actions GenerateFsm::OnHandoffDone(int attempt, const grpc::Status& status,
                                                const v1::HandoffResponse& response) {
  Actions a;
  if (!migration_.has_value() || attempt != migration_->handoff || done()) return a;
  migration_->handoff = -1;
  if (status.ok()) {
    // The target's first tokens complete the move.
    LOG(INFO) << "[" << id_ << "] handed over " << response.kv_transfer_bytes()
              << " bytes of KV in " << response.kv_transfer_ms() << " ms";
    return a;
  }
  RecomputeAfterFailedMigration(absl::StrCat("the handoff from ", migration_->source_address,
                                             " failed: ", StatusCodeName(status.error_code()),
                                             ": ", status.error_message()),
                                &a);
  return a;
}

void GenerateFsm::AbandonMigration(Actions* a) {
  if (!migration_.has_value()) return;
  a->cancel_source = migration_->source;
  if (migration_->handoff >= 0) a->cancel_handoff = migration_->handoff;
  migration_.reset();
}

void GenerateFsm::RecomputeAfterFailedMigration(const std::string& why, Actions* a) {
  LOG(WARNING) << "[" << id_ << "] moving the stream failed (" << why
               << "); recomputing it on another decode worker";
  AbandonMigration(a);
  if (env_.metrics != nullptr) env_.metrics->CountMigration(/*moved=*/false);
  if (decode_active_) {
    // The target's reservation never got its KV; its blocks come back once
    // the stream is torn down there.
    a->cancel_decode = decode_;
    decode_active_ = false;
    release_wait_until_ = Now() + retry_.failover_wait;
    released_on_ = decode_worker_.address;
  }
  reads_paused_ = false;
  if (DeadlinePassed()) {
    Fail(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                      absl::StrCat("deadline exceeded while moving the stream (", why, ")")),
         a);
    return;
  }
  if (failovers_ >= retry_.decode_failovers) {
    Fail(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      absl::StrCat("moving the stream failed after ", relay_->completion_tokens(),
                                   " tokens (", why, ") and the decode failover budget of ",
                                   retry_.decode_failovers, " is used up")),
         a);
    return;
  }
  ++failovers_;
  failover_wait_until_ = Now() + retry_.failover_wait;
  Place(a);
}

// ---------------------------------------------------------------------------
// Prefill attempts

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
  p.set_decode_migrations(static_cast<uint32_t>(migrations_));
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
