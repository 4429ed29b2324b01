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
std::shared_ptr<Stub> Reached(const absl::flat_hash_map<std::string, std::shared_ptr<Stub>>& stubs,
                              const std::string& address) {
  auto it = stubs.find(address);
  CHECK(it != stubs.end()) << "a start on " << address << " that no transition reached";
  return it->second;
}

}  // namespace

GenerateCall::Ref GenerateCall::Create(const Env& env, GenerateClient* client,
                                       absl::Time client_deadline) {
  return Ref(new GenerateCall(env, client, client_deadline));
}

GenerateCall::GenerateCall(const Env& env, GenerateClient* client, absl::Time client_deadline)
    : destroy_notice_{env.on_destroyed},
      env_(env),
      client_(client),
      client_deadline_(client_deadline),
      fsm_(FsmEnv(env)) {}

GenerateCall::~GenerateCall() {
  absl::MutexLock lock(&mu_);
  SyncGauges(/*ending=*/true);  // what this call still counted
}

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
  const absl::Time cap = env_.config->request_timeout_ms > 0
                             ? absl::Now() + absl::Milliseconds(env_.config->request_timeout_ms)
                             : absl::InfiniteFuture();
  const absl::Time deadline = std::min(client_deadline_, cap);
  deadline_ = absl::ToChronoTime(deadline);
  absl::StatusOr<ValidatedRequest> validated = env_.validator->Validate(request);
  React(
      [&](GenerateFsm& fsm) {
        return fsm.Start(id, std::move(validated), deadline, client_deadline_);
      },
      /*owns_hold=*/true);  // Start()'s own
}

void GenerateCall::React(absl::FunctionRef<GenerateFsm::Actions(GenerateFsm&)> transition,
                         bool owns_hold) {
  Ops ops;
  {
    absl::MutexLock lock(&mu_);
    if (!owns_hold) ++holds_;
    Prepare(transition(fsm_), &ops);
    Pump(&ops);
  }
  Run(std::move(ops));
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
  Run(std::move(ops));
  return keep_reading;
}

void GenerateCall::OnDecodeDone(DecodeStream* stream, const grpc::Status& status) {
  Ops ops;
  {
    absl::MutexLock lock(&mu_);
    Prepare(fsm_.OnDecodeDone(AttemptOf(stream), status), &ops);
    Pump(&ops);
  }
  Run(std::move(ops));
  Release();  // the stream's
}

void GenerateCall::OnWatchdog(bool fired) {
  Ops ops;
  {
    absl::MutexLock lock(&mu_);
    watchdog_ = nullptr;
    Prepare(fsm_.OnWatchdog(fired), &ops);
    Pump(&ops);
  }
  Run(std::move(ops));
  Release();  // the watchdog's
}

void GenerateCall::OnWriteDone(bool ok) {
  Ops ops;
  {
    absl::MutexLock lock(&mu_);
    ++holds_;  // the event's
    WriteDoneLocked(ok, &ops);
    Pump(&ops);
  }
  Run(std::move(ops));
  Release();
}

void GenerateCall::WriteDoneLocked(bool ok, Ops* ops) {
  out_.WriteDone();
  if (!ok) {
    out_.DropPending();
    Prepare(fsm_.OnClientWriteFailed(), ops);
  }
  if (out_.pending() <= kResumeReadsAt) Prepare(fsm_.OnClientDrained(), ops);
}

void GenerateCall::OnClientCancel() {
  Ops ops;
  {
    absl::MutexLock lock(&mu_);
    ++holds_;  // the event's
    out_.DropPending();
    Prepare(fsm_.OnClientCancel(), &ops);
    Pump(&ops);
  }
  Run(std::move(ops));
  Release();
}

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

void GenerateCall::Prepare(GenerateFsm::Actions a, Ops* ops) {
  PrepareStarts(a, ops);
  decode_stubs_.clear();
  prefill_stubs_.clear();
  PrepareCancels(a, ops);
  for (v1::GenerateResponse& response : a.responses) {
    streamed_ |= response.has_chunk();
    out_.Push(std::move(response));
  }
  if (a.outcome.has_value()) out_.Close(*a.outcome);
}

// The attempt numbers the state machine hands out index the RPC lists: a
// mismatch would route callbacks to the wrong RPC, so it is checked in
// release builds too.
template <typename Call, typename Deliver>
void GenerateCall::StartWorkerCall(std::vector<std::unique_ptr<Call>>& calls, int attempt,
                                   std::unique_ptr<Call> call,
                                   std::shared_ptr<typename Call::Stub> stub, Deliver deliver,
                                   Ops* ops) {
  CHECK_EQ(static_cast<size_t>(attempt), calls.size());
  Call* c = calls.emplace_back(std::move(call)).get();
  ++holds_;  // released by React once the call's end is delivered
  ops->run.push_back([this, c, stub = std::move(stub), deliver] {
    c->Start(stub, [this, c, deliver](grpc::Status status) {
      React([&](GenerateFsm& fsm) { return deliver(fsm, *c, status); }, /*owns_hold=*/true);
    });
  });
}

void GenerateCall::SetAlarm(grpc::Alarm* alarm, absl::Duration delay,
                            std::function<void(bool)> fired, Ops* ops) {
  ops->run.push_back([alarm, delay, fired = std::move(fired)] {
    alarm->Set(std::chrono::system_clock::now() + absl::ToChronoMicroseconds(delay), fired);
  });
}

void GenerateCall::StartDecode(GenerateFsm::DecodeStart& start, Ops* ops) {
  CHECK_EQ(static_cast<size_t>(start.attempt), streams_.size());
  DecodeStream::Observer* observer = this;
  DecodeStream* stream = streams_
                             .emplace_back(std::make_unique<DecodeStream>(
                                 observer, start.address, std::move(start.request), deadline_))
                             .get();
  ++holds_;  // released by OnDecodeDone
  ops->run.push_back(
      [stream, stub = Reached(decode_stubs_, start.address)] { stream->Start(stub); });
}

// Each worker RPC kind is one entry here: the call object, its stub and
// the state machine's handler of its end.
void GenerateCall::PrepareStarts(GenerateFsm::Actions& a, Ops* ops) {
  if (a.start_decode.has_value()) StartDecode(*a.start_decode, ops);
  if (a.start_prefill.has_value()) {
    GenerateFsm::PrefillStart& s = *a.start_prefill;
    StartWorkerCall(
        prefills_, s.attempt,
        std::make_unique<PrefillCall>(PrefillCall::Method(&PrefillCall::Async::Prefill),
                                      std::move(s.request), deadline_),
        Reached(prefill_stubs_, s.address),
        [attempt = s.attempt](GenerateFsm& fsm, const PrefillCall& c, const grpc::Status& status) {
          return fsm.OnPrefillDone(attempt, status, c.response());
        },
        ops);
  }
  if (a.start_transfer_retry.has_value()) {
    GenerateFsm::TransferRetryStart& s = *a.start_transfer_retry;
    StartWorkerCall(
        retries_, s.attempt,
        std::make_unique<TransferRetryCall>(
            TransferRetryCall::Method(&TransferRetryCall::Async::RetryTransfer),
            std::move(s.request), deadline_),
        Reached(decode_stubs_, s.address),
        [attempt = s.attempt, placement = s.placement](GenerateFsm& fsm, const TransferRetryCall& c,
                                                       const grpc::Status& status) {
          return fsm.OnTransferRetryDone(attempt, placement, status, c.response().epoch());
        },
        ops);
  }
  if (a.start_handoff.has_value()) {
    GenerateFsm::HandoffStart& s = *a.start_handoff;
    StartWorkerCall(
        handoffs_, s.attempt,
        std::make_unique<HandoffCall>(HandoffCall::Method(&HandoffCall::Async::Handoff),
                                      std::move(s.request), deadline_),
        streams_[s.source]->stub(),
        [attempt = s.attempt](GenerateFsm& fsm, const HandoffCall& c, const grpc::Status& status) {
          return fsm.OnHandoffDone(attempt, status, c.response());
        },
        ops);
  }
  if (a.offer_migration.has_value()) {
    const int attempt = *a.offer_migration;
    v1::OfferMigrationRequest request;
    request.set_request_id(fsm_.id());
    StartWorkerCall(
        offers_, static_cast<int>(offers_.size()),
        std::make_unique<OfferMigrationCall>(
            OfferMigrationCall::Method(&OfferMigrationCall::Async::OfferMigration),
            std::move(request), deadline_),
        streams_[attempt]->stub(),
        [attempt](GenerateFsm& fsm, const OfferMigrationCall&, const grpc::Status& status) {
          return fsm.OnOfferMigrationDone(attempt, status);
        },
        ops);
  }
  PrepareAlarms(a, ops);
}

void GenerateCall::PrepareAlarms(const GenerateFsm::Actions& a, Ops* ops) {
  if (a.arm_watchdog.has_value()) {
    std::unique_ptr<grpc::Alarm>& alarm = watchdogs_[watchdog_slot_];
    watchdog_slot_ ^= 1;
    alarm = std::make_unique<grpc::Alarm>();
    watchdog_ = alarm.get();
    ++holds_;  // released when it fires or is cancelled
    SetAlarm(
        watchdog_, *a.arm_watchdog, [this](bool fired) { OnWatchdog(fired); }, ops);
  }
  if (a.start_backoff.has_value()) {
    grpc::Alarm* alarm = alarms_.emplace_back(std::make_unique<grpc::Alarm>()).get();
    ++holds_;  // released when it fires
    SetAlarm(
        alarm, a.start_backoff->delay,
        [this, id = a.start_backoff->id](bool) {
          React([&](GenerateFsm& fsm) { return fsm.OnBackoffDone(id); }, true);
        },
        ops);
  }
}

void GenerateCall::PrepareCancels(const GenerateFsm::Actions& a, Ops* ops) {
  auto cancel = [ops](auto* rpc) { ops->run.push_back([rpc] { rpc->Cancel(); }); };
  if (a.cancel_handoff.has_value()) cancel(handoffs_[*a.cancel_handoff].get());
  if (a.cancel_source.has_value()) cancel(streams_[*a.cancel_source].get());
  if (a.cancel_prefill.has_value()) cancel(prefills_[*a.cancel_prefill].get());
  if (a.cancel_transfer_retry.has_value()) cancel(retries_[*a.cancel_transfer_retry].get());
  if (a.cancel_decode.has_value()) cancel(streams_[*a.cancel_decode].get());
  if (a.resume_decode.has_value()) {
    DecodeStream* stream = streams_[*a.resume_decode].get();
    ops->run.push_back([stream] { stream->Resume(); });
  }
}

void GenerateCall::Pump(Ops* ops) {
  ResponseQueue::Next next = out_.TakeNext();
  ops->write = next.write;
  ops->finish = std::move(next.finish);
  SyncGauges(ops->finish.has_value());
  // The stream ends: the watchdog lets go of the call at once.
  if (ops->finish.has_value() && watchdog_ != nullptr) {
    grpc::Alarm* watchdog = watchdog_;
    ops->run.push_back([watchdog] { watchdog->Cancel(); });
  }
}

void GenerateCall::SyncGauges(bool ending) {
  if (env_.metrics == nullptr) return;
  const bool paused = !ending && fsm_.reads_paused();
  if (paused != gauged_paused_) {
    env_.metrics->AddPausedStreams(paused ? 1 : -1);
    gauged_paused_ = paused;
  }
  const int64_t bytes = ending ? 0 : out_.pending_bytes();
  if (bytes != gauged_bytes_) {
    env_.metrics->AddClientBufferedBytes(bytes - gauged_bytes_);
    gauged_bytes_ = bytes;
  }
  const Phase phase = ending ? Phase::kNone : streamed_ ? Phase::kRunning : Phase::kWaiting;
  if (phase != gauged_phase_) {
    auto count = [](Phase p, Phase of) { return p == of ? 1 : 0; };
    env_.metrics->AddRequests(
        count(phase, Phase::kWaiting) - count(gauged_phase_, Phase::kWaiting),
        count(phase, Phase::kRunning) - count(gauged_phase_, Phase::kRunning));
    gauged_phase_ = phase;
  }
}

void GenerateCall::Run(Ops ops) {
  for (;;) {
    for (std::function<void()>& op : ops.run) op();
    if (ops.finish.has_value()) return client_->Finish(*ops.finish);
    if (ops.write == nullptr || !client_->Write(*ops.write)) return;
    // The client took the message at once: on to the next.
    ops = Ops();
    absl::MutexLock lock(&mu_);
    WriteDoneLocked(/*ok=*/true, &ops);
    Pump(&ops);
  }
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
