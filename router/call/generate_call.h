// GenerateCall: one Generation.Generate request as a gRPC callback reactor.
// What happens to the request — placement, prefill attempts, retries,
// failover, the watchdog, cancel, deadlines, every message and the final
// status — is decided by its GenerateFsm (router/call/generate_fsm.h, the
// router's request state machine, docs/protocol/request-state-machine.md). GenerateCall feeds
// it the events of its RPCs, timers and client, and carries out the
// Actions it returns with gRPC: it owns the Decode streams, Prefill and
// RetryTransfer calls, alarms, and the response stream's write queue.
//
// Threading: every gRPC reaction (server writes/cancel, decode events,
// prefill and RetryTransfer completion, alarms) locks mu_, hands the event
// to the state machine and turns the Actions into gRPC operations (Ops);
// those run after mu_ is released, because gRPC may run another reaction
// inline. Server writes are serialised: one StartWrite is outstanding at a
// time and later messages queue (ResponseQueue).
//
// Lifetime: the object deletes itself when its last "hold" is released.
// Holds: one for the server RPC (released in OnDone, which gRPC calls after
// Finish and every server reaction), one per client RPC it started
// (released at the end of that RPC's completion: DecodeStream::OnDone,
// the Prefill and RetryTransfer callbacks), one per backoff alarm (released
// when it fires; alarms are short and never cancelled), one while the
// watchdog is armed (released when it fires or is cancelled at Finish), and
// one for Start() itself. So no reaction can run on a deleted object, and
// the decode streams, prefill calls and their contexts outlive every RPC
// that uses them.
#ifndef PDSERVE_ROUTER_CALL_GENERATE_CALL_H_
#define PDSERVE_ROUTER_CALL_GENERATE_CALL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/model/model_card.h"
#include "grpcpp/alarm.h"
#include "grpcpp/grpcpp.h"
#include "pdserve/v1/generation.grpc.pb.h"
#include "router/call/clock.h"
#include "router/call/decode_stream.h"
#include "router/call/decode_unary_call.h"
#include "router/call/generate_fsm.h"
#include "router/call/prefill_call.h"
#include "router/call/request_validator.h"
#include "router/call/response_queue.h"
#include "router/call/router_metrics.h"
#include "router/call/transfer_retry_call.h"
#include "router/config/router_config.h"
#include "router/placement/placement_ledger.h"
#include "router/placement/rebalance_gate.h"
#include "router/pool/circuit_breaker.h"
#include "router/pool/worker_registry.h"

namespace pdserve::router {

class GenerateCall : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                     private DecodeStream::Observer,
                     private GenerateFsm::Workers {
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
    RouterMetrics* metrics = nullptr;   // null: no metrics
    Api api = Api::kGrpc;               // the door the request came in by
    CircuitBreaker* breaker = nullptr;  // null: no circuit breaking
    PlacementLedger* ledger = nullptr;  // null: placements see only load reports
    RebalanceGate* rebalance = nullptr;  // null: no rebalancing
    std::function<void()> on_destroyed;
  };

  // Begins handling `request` and returns the reactor to hand to gRPC.
  static GenerateCall* Create(const Env& env, grpc::CallbackServerContext* context,
                              const v1::GenerateRequest& request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // The gRPC operations the state machine's Actions come to, issued by Run()
  // once mu_ is released.
  struct Ops {
    DecodeStream* start_decode = nullptr;
    std::shared_ptr<v1::DecodeWorker::Stub> decode_stub;
    PrefillCall* start_prefill = nullptr;
    int prefill_attempt = 0;
    std::shared_ptr<v1::PrefillWorker::Stub> prefill_stub;
    TransferRetryCall* start_retry = nullptr;
    int retry_attempt = 0;
    uint64_t retry_placement = 0;
    std::shared_ptr<v1::DecodeWorker::Stub> retry_stub;
    HandoffCall* start_handoff = nullptr;
    int handoff_attempt = 0;
    std::shared_ptr<v1::DecodeWorker::Stub> handoff_stub;
    HandoffCall* cancel_handoff = nullptr;
    OfferMigrationCall* start_offer = nullptr;
    int offer_attempt = 0;
    std::shared_ptr<v1::DecodeWorker::Stub> offer_stub;
    DecodeStream* cancel_source = nullptr;
    grpc::Alarm* start_watchdog = nullptr;
    absl::Duration watchdog_delay;
    grpc::Alarm* cancel_watchdog = nullptr;
    grpc::Alarm* start_backoff = nullptr;
    absl::Duration backoff_delay;
    uint64_t backoff_id = 0;
    DecodeStream* cancel_decode = nullptr;
    PrefillCall* cancel_prefill = nullptr;
    TransferRetryCall* cancel_retry = nullptr;
    DecodeStream* resume_decode = nullptr;
    const grpc::ByteBuffer* write = nullptr;
    std::optional<grpc::Status> finish;
  };

  GenerateCall(const Env& env, grpc::CallbackServerContext* context);
  ~GenerateCall() override;

  GenerateFsm::Env FsmEnv(const Env& env);

  void Start(const v1::GenerateRequest& request);
  bool OnDecodeEvent(DecodeStream* stream, const v1::DecodeEvent& event) override;
  void OnDecodeDone(DecodeStream* stream, const grpc::Status& status) override;
  void OnPrefillDone(int attempt, const grpc::Status& status);
  void OnBackoffDone(uint64_t id);
  void OnWatchdog(bool fired);
  void OnRetryTransferDone(int attempt, uint64_t placement, const grpc::Status& status);
  void OnHandoffDone(int attempt, const grpc::Status& status);
  void OnOfferMigrationDone(int attempt, const grpc::Status& status);

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
  // Collects the next write, or Finish once the outcome is decided and
  // every queued message is written (ResponseQueue).
  void Pump(Ops* ops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Issues the collected gRPC operations; called without mu_.
  void Run(Ops& ops);
  // Drops one hold; the last one deletes the call. Called without mu_ and
  // as the last statement of a reaction.
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
  grpc::CallbackServerContext* const server_context_;
  // Written once in Start() before any RPC begins, then read-only.
  std::chrono::system_clock::time_point deadline_;

  absl::Mutex mu_;
  int holds_ ABSL_GUARDED_BY(mu_) = 2;  // the server RPC and Start()
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
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_GENERATE_CALL_H_
