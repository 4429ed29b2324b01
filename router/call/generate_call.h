// GenerateCall: one Generation.Generate request, whichever door it came in
// by (GenerateClient: the gRPC API or the in-process OpenAI front).
// What happens to the request — placement, prefill attempts, retries,
// failover, the watchdog, cancel, deadlines, every message and the final
// status — is decided by its GenerateFsm (router/call/generate_fsm.h, the
// router's request state machine, docs/protocol/request-state-machine.md).
// GenerateCall feeds it the events of its RPCs, timers and client, and
// carries out the Actions it returns with gRPC: it owns the Decode streams,
// the unary worker calls (WorkerCall), the alarms, and the client's write
// queue.
//
// Threading: every event (a worker RPC's event or end, an alarm, the
// client's write completion or cancel) locks mu_, hands the event to the
// state machine, and Prepare() turns the Actions into closures (Ops) that
// run after mu_ is released, because gRPC and the client may call back
// inline. Client writes are serialised: one is outstanding at a time and
// later messages queue (ResponseQueue).
//
// Lifetime: the object deletes itself when its last "hold" is released.
// Holds: one for the client (a Ref the door keeps until it no longer calls
// in), one per worker RPC it started (released at the end of that RPC's
// completion), one per backoff alarm (released when it fires; alarms are
// short and never cancelled), one while the watchdog is armed (released
// when it fires or is cancelled at Finish), one for Start(), and one during
// each client event. So no event can run on a deleted object, and the
// streams, worker calls and their contexts outlive every RPC that uses
// them.
#ifndef PDSERVE_ROUTER_CALL_GENERATE_CALL_H_
#define PDSERVE_ROUTER_CALL_GENERATE_CALL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/model/model_card.h"
#include "grpcpp/alarm.h"
#include "grpcpp/grpcpp.h"
#include "pdserve/v1/generation.pb.h"
#include "router/call/clock.h"
#include "router/call/decode_stream.h"
#include "router/call/generate_client.h"
#include "router/call/generate_fsm.h"
#include "router/call/request_validator.h"
#include "router/call/response_queue.h"
#include "router/call/router_metrics.h"
#include "router/call/worker_call.h"
#include "router/config/router_config.h"
#include "router/placement/placement_ledger.h"
#include "router/placement/rebalance_gate.h"
#include "router/pool/circuit_breaker.h"
#include "router/pool/worker_registry.h"

namespace pdserve::router {

class GenerateCall : private DecodeStream::Observer, private GenerateFsm::Workers {
 public:
  // What every call shares; owned by GenerationService, which outlives all
  // calls (it waits for on_destroyed of each).
  struct Env {
    const ModelCard* model = nullptr;
    const RouterConfig* config = nullptr;
    const RequestValidator* validator = nullptr;
    WorkerRegistry* registry = nullptr;
    std::atomic<uint64_t>* decode_ticket = nullptr;
    std::atomic<uint64_t>* prefill_ticket = nullptr;
    RouterMetrics* metrics = nullptr;    // null: no metrics
    Api api = Api::kGrpc;                // the door the request came in by
    CircuitBreaker* breaker = nullptr;   // null: no circuit breaking
    PlacementLedger* ledger = nullptr;   // null: placements see only load reports
    RebalanceGate* rebalance = nullptr;  // null: no rebalancing
    std::function<void()> on_destroyed;
  };

  // The client's hold on its call (move-only): the door keeps it while it
  // may still call OnWriteDone or OnClientCancel, and drops it after the
  // call's Finish reached it.
  class Ref {
   public:
    Ref() = default;
    Ref(Ref&& other) noexcept : call_(std::exchange(other.call_, nullptr)) {}
    Ref& operator=(Ref&& other) noexcept {
      std::swap(call_, other.call_);
      return *this;
    }
    ~Ref() {
      if (call_ != nullptr) call_->Release();
    }
    GenerateCall* operator->() const { return call_; }
    explicit operator bool() const { return call_ != nullptr; }

   private:
    friend class GenerateCall;
    explicit Ref(GenerateCall* adopted) : call_(adopted) {}
    GenerateCall* call_ = nullptr;
  };

  // A call that will answer `client`, which must stay valid until the
  // call's Finish; `client_deadline` is the client's own (InfiniteFuture:
  // none). Start() it once the door holds the Ref.
  static Ref Create(const Env& env, GenerateClient* client, absl::Time client_deadline);

  // Admits `request` (validates and places it); once.
  void Start(const v1::GenerateRequest& request);

  // The door's reports: a write that Write() left outstanding completed
  // (`ok` false: the client is gone); the client went away.
  void OnWriteDone(bool ok);
  void OnClientCancel();

 private:
  // The operations Prepare() makes of the state machine's Actions, run in
  // order once mu_ is released; then the next client write or the finish.
  struct Ops {
    std::vector<std::function<void()>> run;
    const v1::GenerateResponse* write = nullptr;
    std::optional<grpc::Status> finish;
  };

  GenerateCall(const Env& env, GenerateClient* client, absl::Time client_deadline);
  ~GenerateCall() override;

  GenerateFsm::Env FsmEnv(const Env& env);

  bool OnDecodeEvent(DecodeStream* stream, const v1::DecodeEvent& event) override;
  void OnDecodeDone(DecodeStream* stream, const grpc::Status& status) override;
  void OnWatchdog(bool fired);
  // Hands one event to the state machine and carries out what it decided;
  // then drops the event's hold (`owns_hold`: the event brought one, as a
  // worker RPC's end or an alarm does; else one is taken for it).
  void React(absl::FunctionRef<GenerateFsm::Actions(GenerateFsm&)> transition, bool owns_hold);

  // GenerateFsm::Workers: the registry's view, and the stubs of the workers
  // the state machine is about to call (kept for the start action).
  std::shared_ptr<const RegistrySnapshot> snapshot() const override;
  bool ReachDecode(const std::string& address) override;
  bool ReachPrefill(const std::string& address) override;

  // The decode attempt number of `stream`.
  int AttemptOf(const DecodeStream* stream) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Creates the RPC objects and alarms `actions` start (taking a hold for
  // each), queues its responses and outcome, and notes the operations.
  void Prepare(GenerateFsm::Actions actions, Ops* ops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PrepareStarts(GenerateFsm::Actions& a, Ops* ops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartDecode(GenerateFsm::DecodeStart& start, Ops* ops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PrepareAlarms(const GenerateFsm::Actions& a, Ops* ops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PrepareCancels(const GenerateFsm::Actions& a, Ops* ops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts worker RPC `call`, kept as `calls[attempt]`, on `stub`; its end
  // goes to the state machine through `deliver(fsm, call, status)`.
  template <typename Call, typename Deliver>
  void StartWorkerCall(std::vector<std::unique_ptr<Call>>& calls, int attempt,
                       std::unique_ptr<Call> call, std::shared_ptr<typename Call::Stub> stub,
                       Deliver deliver, Ops* ops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets `alarm` to run `fired(ok)` after `delay` (or when cancelled).
  static void SetAlarm(grpc::Alarm* alarm, absl::Duration delay, std::function<void(bool)> fired,
                       Ops* ops);
  // A client write completed.
  void WriteDoneLocked(bool ok, Ops* ops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Collects the next write, or Finish once the outcome is decided and
  // every queued message is written (ResponseQueue).
  // Brings the back-pressure and request gauges up to date (to nothing
  // once `ending`).
  void SyncGauges(bool ending) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Pump(Ops* ops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Issues the collected operations, then writes to the client for as long
  // as its writes complete inline; called without mu_.
  void Run(Ops ops);
  // Drops one hold; the last one deletes the call. Called without mu_ and
  // as the last statement of an event.
  void Release();

  // Runs a callback when destroyed. Declared first, so destroyed last: the
  // service hears that a call is gone (on_destroyed) only once its streams,
  // stubs, client contexts and alarms are, and WaitForCalls() then means no
  // gRPC object of any call is left for a late thread to release.
  struct DestroyNotice {
    std::function<void()> fn;
    ~DestroyNotice() {
      if (fn) fn();
    }
  };
  DestroyNotice destroy_notice_;
  const Env env_;
  const SystemClock clock_;
  GenerateClient* const client_;
  const absl::Time client_deadline_;
  // Written once in Start() before any RPC begins, then read-only.
  std::chrono::system_clock::time_point deadline_;

  absl::Mutex mu_;
  int holds_ ABSL_GUARDED_BY(mu_) = 2;  // the client's Ref and Start()
  GenerateFsm fsm_ ABSL_GUARDED_BY(mu_);

  // gRPC stubs that ReachDecode/ReachPrefill found during a transition, by
  // worker address, for the start actions Prepare turns them into. Kept
  // rather than looked up again: the worker may leave the registry between
  // the state machine's check and Prepare, and the start must go to the
  // worker the check saw. Emptied by every Prepare.
  absl::flat_hash_map<std::string, std::shared_ptr<v1::DecodeWorker::Stub>> decode_stubs_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<v1::PrefillWorker::Stub>> prefill_stubs_
      ABSL_GUARDED_BY(mu_);

  // The RPCs of the request, indexed by the state machine's attempt
  // numbers; each lives until the call is deleted.
  std::vector<std::unique_ptr<DecodeStream>> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<PrefillCall>> prefills_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<TransferRetryCall>> retries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<HandoffCall>> handoffs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<OfferMigrationCall>> offers_ ABSL_GUARDED_BY(mu_);
  // Backoff timers, oldest first; each lives until its callback ran. They
  // are never cancelled (a backoff is short): a stale one finds its
  // placement gone or the request decided and does nothing.
  std::vector<std::unique_ptr<grpc::Alarm>> alarms_ ABSL_GUARDED_BY(mu_);
  // The watchdog's alarms, used in turn: each arm makes a new one in the
  // slot whose callback ran long ago (one is never re-Set).
  std::unique_ptr<grpc::Alarm> watchdogs_[2] ABSL_GUARDED_BY(mu_);
  int watchdog_slot_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::Alarm* watchdog_ ABSL_GUARDED_BY(mu_) = nullptr;  // armed, if any

  ResponseQueue out_ ABSL_GUARDED_BY(mu_);
  // Whether a token chunk went to the client: the call is running, not
  // waiting, in the request gauges.
  bool streamed_ ABSL_GUARDED_BY(mu_) = false;
  enum class Phase { kNone, kWaiting, kRunning };
  Phase gauged_phase_ ABSL_GUARDED_BY(mu_) = Phase::kNone;
  // What this call adds to the back-pressure gauges now.
  bool gauged_paused_ ABSL_GUARDED_BY(mu_) = false;
  int64_t gauged_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_GENERATE_CALL_H_
