#include "router/call/generate_call.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "glog/logging.h"

namespace pdserve::router {
namespace {

// A client slower than its decode worker stops our reads at this many
// queued messages; HTTP/2 flow control then slows the worker.
constexpr size_t kPauseReadsAt = 32;
constexpr size_t kResumeReadsAt = 8;

std::string NewRequestId() {
  absl::BitGen gen;
  return absl::StrFormat("r-%016x", absl::Uniform<uint64_t>(gen));
}

// The stub a transition reached `address` with. The state machine starts
// an RPC only on a worker it reached in the same transition, so a missing
// one is a bug: a null stub would crash later, far from the cause.
template <typename Stub>
std::shared_ptr<Stub> Reached(
    const absl::flat_hash_map<std::string, std::shared_ptr<Stub>>& stubs,
    const std::string& address) {
  auto it = stubs.find(address);
  CHECK(it != stubs.end()) << "a start on " << address << " that no transition reached";
  return it->second;
}

}  // namespace

GenerateCall* GenerateCall::Create(const Env& env, grpc::CallbackServerContext* context,
                                   const v1::GenerateRequest& request) {
  auto* call = new GenerateCall(env, context);
  call->Start(request);
  return call;
}

GenerateCall::GenerateCall(const Env& env, grpc::CallbackServerContext* context)
    : destroy_notice_{env.on_destroyed},
      env_(env),
      server_context_(context),
      fsm_(FsmEnv(env)) {}

GenerateCall::~GenerateCall() = default;

GenerateFsm::Env GenerateCall::FsmEnv(const Env& env) {
  GenerateFsm::Env e;
  e.config = env.config;
  e.tokenizer = &env.model->tokenizer();
  e.model_fingerprint = env.model->fingerprint();
  e.workers = this;
  e.decode_ticket = env.decode_ticket;
  e.prefill_ticket = env.prefill_ticket;
  e.metrics = env.metrics;
  e.api = env.api;
  e.breaker = env.breaker;
  e.ledger = env.ledger;
  e.rebalance = env.rebalance;
  e.clock = &clock_;
  return e;
}

void GenerateCall::Start(const v1::GenerateRequest& request) {
  const absl::Status id_ok = RequestValidator::ValidateRequestId(request.request_id());
  const std::string id =
      request.request_id().empty() || !id_ok.ok() ? NewRequestId() : request.request_id();
  const auto cap =
      std::chrono::system_clock::now() + std::chrono::milliseconds(env_.config->request_timeout_ms);
  deadline_ = std::min(server_context_->deadline(), cap);
  absl::StatusOr<ValidatedRequest> validated = env_.validator->Validate(request);
  Ops ops;
  {
    absl::MutexLock lock(&mu_);
    Prepare(fsm_.Start(id, std::move(validated), absl::FromChrono(deadline_),
                       absl::FromChrono(server_context_->deadline())),
            &ops);
    Pump(&ops);
  }
  Run(ops);
  Release();
}

bool GenerateCall::OnDecodeEvent(DecodeStream* stream, const v1::DecodeEvent& event) {
  Ops ops;
  bool keep_reading = true;
  {
    absl::MutexLock lock(&mu_);
    const int attempt = AttemptOf(stream);
    Prepare(fsm_.OnDecodeEvent(attempt, event), &ops);
    // After the event: one that moved the stream (Migrating) leaves this
    // attempt no longer current, and the pause is the new attempt's to make.
    const bool current = fsm_.IsCurrentDecode(attempt);
    if (current && !fsm_.done() && out_.pending() >= kPauseReadsAt) {
      VLOG(1) << "[" << fsm_.id() << "] client is slow: pausing reads from " << stream->address();
      keep_reading = false;
      fsm_.PauseReads();
    }
    Pump(&ops);
  }
  Run(ops);
  return keep_reading;
}

void GenerateCall::OnDecodeDone(DecodeStream* stream, const grpc::Status& status) {
  Ops ops;
  {
    absl::MutexLock lock(&mu_);
    Prepare(fsm_.OnDecodeDone(AttemptOf(stream), status), &ops);
    Pump(&ops);
  }
  Run(ops);
  Release();
}

void GenerateCall::OnPrefillDone(int attempt, const grpc::Status& status) {
  Ops ops;
  {
    absl::MutexLock lock(&mu_);
    Prepare(fsm_.OnPrefillDone(attempt, status, prefills_[attempt]->response()), &ops);
    Pump(&ops);
  }
  Run(ops);
  Release();
}

void GenerateCall::OnBackoffDone(uint64_t id) {
  Ops ops;
  {
    absl::MutexLock lock(&mu_);
    Prepare(fsm_.OnBackoffDone(id), &ops);
    Pump(&ops);
  }
  Run(ops);
  Release();
}

void GenerateCall::OnWatchdog(bool fired) {
  Ops ops;
  {
    absl::MutexLock lock(&mu_);
    watchdog_ = nullptr;
    Prepare(fsm_.OnWatchdog(fired), &ops);
    Pump(&ops);
  }
  Run(ops);
  Release();
}

void GenerateCall::OnRetryTransferDone(int attempt, uint64_t placement,
                                       const grpc::Status& status) {
  Ops ops;
  {
    absl::MutexLock lock(&mu_);
    Prepare(fsm_.OnTransferRetryDone(attempt, placement, status, retries_[attempt]->epoch()),
            &ops);
    Pump(&ops);
  }
  Run(ops);
  Release();
}

void GenerateCall::OnHandoffDone(int attempt, const grpc::Status& status) {
  Ops ops;
  {
    absl::MutexLock lock(&mu_);
    Prepare(fsm_.OnHandoffDone(attempt, status, handoffs_[attempt]->response()), &ops);
    Pump(&ops);
  }
  Run(ops);
  Release();
}

void GenerateCall::OnOfferMigrationDone(int attempt, const grpc::Status& status) {
  Ops ops;
  {
    absl::MutexLock lock(&mu_);
    Prepare(fsm_.OnOfferMigrationDone(attempt, status), &ops);
    Pump(&ops);
  }
  Run(ops);
  Release();
}

void GenerateCall::OnWriteDone(bool ok) {
  Ops ops;
  {
    absl::MutexLock lock(&mu_);
    out_.WriteDone();
    if (!ok) {
      out_.DropPending();
      Prepare(fsm_.OnClientWriteFailed(), &ops);
    }
    if (out_.pending() <= kResumeReadsAt) Prepare(fsm_.OnClientDrained(), &ops);
    Pump(&ops);
  }
  Run(ops);
}

void GenerateCall::OnCancel() {
  Ops ops;
  {
    absl::MutexLock lock(&mu_);
    out_.DropPending();
    Prepare(fsm_.OnClientCancel(), &ops);
    Pump(&ops);
  }
  Run(ops);
}

void GenerateCall::OnDone() { Release(); }

std::shared_ptr<const RegistrySnapshot> GenerateCall::snapshot() const {
  return env_.registry->snapshot();
}

bool GenerateCall::ReachDecode(const std::string& address) {
  mu_.AssertHeld();  // the state machine runs under mu_
  std::shared_ptr<v1::DecodeWorker::Stub> stub = env_.registry->decode_stub(address);
  if (stub == nullptr) return false;
  decode_stubs_[address] = std::move(stub);
  return true;
}

bool GenerateCall::ReachPrefill(const std::string& address) {
  mu_.AssertHeld();
  std::shared_ptr<v1::PrefillWorker::Stub> stub = env_.registry->prefill_stub(address);
  if (stub == nullptr) return false;
  prefill_stubs_[address] = std::move(stub);
  return true;
}

int GenerateCall::AttemptOf(const DecodeStream* stream) const {
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (streams_[i].get() == stream) return static_cast<int>(i);
  }
  return -1;
}

// The attempt numbers the state machine hands out index streams_,
// prefills_ and retries_: a mismatch would route callbacks to the wrong
// RPC, so it is checked in release builds too.
void GenerateCall::Prepare(GenerateFsm::Actions a, Ops* ops) {
  if (a.start_decode.has_value()) {
    GenerateFsm::DecodeStart& start = *a.start_decode;
    CHECK_EQ(static_cast<size_t>(start.attempt), streams_.size());
    DecodeStream::Observer* observer = this;
    streams_.push_back(std::make_unique<DecodeStream>(observer, start.address,
                                                      std::move(start.request), deadline_));
    ++holds_;
    ops->start_decode = streams_.back().get();
    ops->decode_stub = Reached(decode_stubs_, start.address);
  }
  if (a.start_prefill.has_value()) {
    GenerateFsm::PrefillStart& start = *a.start_prefill;
    CHECK_EQ(static_cast<size_t>(start.attempt), prefills_.size());
    prefills_.push_back(
        std::make_unique<PrefillCall>(start.address, std::move(start.request), deadline_));
    ++holds_;
    ops->start_prefill = prefills_.back().get();
    ops->prefill_attempt = start.attempt;
    ops->prefill_stub = Reached(prefill_stubs_, start.address);
  }
  if (a.start_transfer_retry.has_value()) {
    GenerateFsm::TransferRetryStart& start = *a.start_transfer_retry;
    CHECK_EQ(static_cast<size_t>(start.attempt), retries_.size());
    retries_.push_back(std::make_unique<TransferRetryCall>(std::move(start.request), deadline_));
    ++holds_;
    ops->start_retry = retries_.back().get();
    ops->retry_attempt = start.attempt;
    ops->retry_placement = start.placement;
    ops->retry_stub = Reached(decode_stubs_, start.address);
  }
  if (a.start_handoff.has_value()) {
    GenerateFsm::HandoffStart& start = *a.start_handoff;
    CHECK_EQ(static_cast<size_t>(start.attempt), handoffs_.size());
    handoffs_.push_back(std::make_unique<HandoffCall>(
        HandoffCall::Method(&HandoffCall::Async::Handoff), std::move(start.request), deadline_));
    ++holds_;
    ops->start_handoff = handoffs_.back().get();
    ops->handoff_attempt = start.attempt;
    ops->handoff_stub = streams_[start.source]->stub();
  }
  if (a.offer_migration.has_value()) {
    v1::OfferMigrationRequest request;
    request.set_request_id(fsm_.id());
    offers_.push_back(std::make_unique<OfferMigrationCall>(
        OfferMigrationCall::Method(&OfferMigrationCall::Async::OfferMigration), std::move(request),
        deadline_));
    ++holds_;
    ops->start_offer = offers_.back().get();
    ops->offer_attempt = *a.offer_migration;
    ops->offer_stub = streams_[*a.offer_migration]->stub();
  }
  decode_stubs_.clear();
  prefill_stubs_.clear();
  if (a.arm_watchdog.has_value()) {
    std::unique_ptr<grpc::Alarm>& alarm = watchdogs_[watchdog_slot_];
    watchdog_slot_ ^= 1;
    alarm = std::make_unique<grpc::Alarm>();
    watchdog_ = alarm.get();
    ++holds_;
    ops->start_watchdog = watchdog_;
    ops->watchdog_delay = *a.arm_watchdog;
  }
  if (a.start_backoff.has_value()) {
    alarms_.push_back(std::make_unique<grpc::Alarm>());
    ++holds_;
    ops->start_backoff = alarms_.back().get();
    ops->backoff_delay = a.start_backoff->delay;
    ops->backoff_id = a.start_backoff->id;
  }
  if (a.cancel_decode.has_value()) ops->cancel_decode = streams_[*a.cancel_decode].get();
  if (a.cancel_prefill.has_value()) ops->cancel_prefill = prefills_[*a.cancel_prefill].get();
  if (a.cancel_transfer_retry.has_value()) {
    ops->cancel_retry = retries_[*a.cancel_transfer_retry].get();
  }
  if (a.resume_decode.has_value()) ops->resume_decode = streams_[*a.resume_decode].get();
  if (a.cancel_source.has_value()) ops->cancel_source = streams_[*a.cancel_source].get();
  if (a.cancel_handoff.has_value()) ops->cancel_handoff = handoffs_[*a.cancel_handoff].get();
  for (const v1::GenerateResponse& response : a.responses) out_.Push(response);
  if (a.outcome.has_value()) out_.Close(*a.outcome);
}

void GenerateCall::Pump(Ops* ops) {
  ResponseQueue::Next next = out_.TakeNext();
  ops->write = next.write;
  ops->finish = std::move(next.finish);
  // The stream ends: the watchdog lets go of the call at once.
  if (ops->finish.has_value() && watchdog_ != nullptr) ops->cancel_watchdog = watchdog_;
}

void GenerateCall::Run(Ops& ops) {
  if (ops.start_decode != nullptr) ops.start_decode->Start(std::move(ops.decode_stub));
  if (ops.start_prefill != nullptr) {
    const int attempt = ops.prefill_attempt;
    ops.start_prefill->Start(std::move(ops.prefill_stub),
                             [this, attempt](grpc::Status s) { OnPrefillDone(attempt, s); });
  }
  if (ops.start_watchdog != nullptr) {
    ops.start_watchdog->Set(
        std::chrono::system_clock::now() + absl::ToChronoMicroseconds(ops.watchdog_delay),
        [this](bool fired) { OnWatchdog(fired); });
  }
  if (ops.start_backoff != nullptr) {
    const uint64_t id = ops.backoff_id;
    ops.start_backoff->Set(
        std::chrono::system_clock::now() + absl::ToChronoMicroseconds(ops.backoff_delay),
        [this, id](bool) { OnBackoffDone(id); });
  }
  if (ops.start_retry != nullptr) {
    const int attempt = ops.retry_attempt;
    const uint64_t placement = ops.retry_placement;
    ops.start_retry->Start(std::move(ops.retry_stub), [this, attempt, placement](grpc::Status s) {
      OnRetryTransferDone(attempt, placement, s);
    });
  }
  if (ops.start_handoff != nullptr) {
    const int attempt = ops.handoff_attempt;
    ops.start_handoff->Start(std::move(ops.handoff_stub),
                             [this, attempt](grpc::Status s) { OnHandoffDone(attempt, s); });
  }
  if (ops.start_offer != nullptr) {
    const int attempt = ops.offer_attempt;
    ops.start_offer->Start(std::move(ops.offer_stub),
                           [this, attempt](grpc::Status s) { OnOfferMigrationDone(attempt, s); });
  }
  if (ops.cancel_handoff != nullptr) ops.cancel_handoff->Cancel();
  if (ops.cancel_source != nullptr) ops.cancel_source->Cancel();
  if (ops.cancel_prefill != nullptr) ops.cancel_prefill->Cancel();
  if (ops.cancel_retry != nullptr) ops.cancel_retry->Cancel();
  if (ops.cancel_decode != nullptr) ops.cancel_decode->Cancel();
  if (ops.resume_decode != nullptr) ops.resume_decode->Resume();
  if (ops.cancel_watchdog != nullptr) ops.cancel_watchdog->Cancel();
  if (ops.write != nullptr) StartWrite(ops.write);
  if (ops.finish.has_value()) Finish(*ops.finish);
}

void GenerateCall::Release() {
  bool last = false;
  {
    absl::MutexLock lock(&mu_);
    last = --holds_ == 0;
  }
  if (last) delete this;
}

}  // namespace pdserve::router
