// GenerateFsm: the router's request state machine for one Generate request
// (docs/protocol/request-state-machine.md) as a value: events
// in, actions out. It decides everything about the request — placement,
// decode retries on refusal, the prefill attempts (first try, backoff,
// RetryTransfer to a new epoch, retry on another prefill worker), the
// fall-back to local prefill, decode failover, the watchdog, client
// cancel, deadlines and the response stream's messages and status — and
// performs no RPC: each event returns the Actions that GenerateCall
// carries out with gRPC.
//
//   kAdmitted --Start--> kPlacing --a decode worker--> kDecodeOpen
//   kDecodeOpen --Reserved (remote)--> kPrefilling --first Tokens--> kStreaming
//   kDecodeOpen --first Tokens (local)--> kStreaming
//   kDecodeOpen --refused/unreachable--> kPlacing (without that worker)
//   kPrefilling --Prefill failed--> backoff, RetryTransfer, Prefill again
//   kPrefilling --no prefill worker left / KV wait expired--> kPlacing (local)
//   kStreaming --stream broke--> kPlacing (decode failover)
//   kStreaming --Migrating (the worker drains, or rebalances when asked)--> kPlacing (a target)
//     --Reserved--> kPrefilling (Handoff from the source) --first Tokens--> kStreaming
//     (a failed move: the decode failover, recomputing)
//   kStreaming --DecodeFinished or stop--> kCompleting --Prefill resolved--> kDone
//   any --failure, budget used up, cancel, deadline--> kDone
//
// Time comes from the injected Clock and backoff jitter from Env::jitter,
// so every deadline, backoff and watchdog verdict follows from the events
// and the clock (tests/unit/router/call/generate_fsm_test.cc, without gRPC).
//
// Worker RPCs are named by attempt numbers handed out in the start
// actions: decode streams, Prefill calls and RetryTransfer calls are each
// counted from 0. Events of an attempt that is no longer current, of a
// superseded placement, or after the outcome is decided are ignored.
//
// Not thread-safe: GenerateCall serialises every call under its mutex.
#ifndef PDSERVE_ROUTER_CALL_GENERATE_FSM_H_
#define PDSERVE_ROUTER_CALL_GENERATE_FSM_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/text/tokenizer.h"
#include "grpcpp/support/status.h"
#include "pdserve/v1/generation.pb.h"
#include "pdserve/v1/worker.pb.h"
#include "router/call/clock.h"
#include "router/call/decode_attempts.h"
#include "router/call/prefill_attempts.h"
#include "router/call/request_timeline.h"
#include "router/call/request_validator.h"
#include "router/call/retry_policy.h"
#include "router/call/router_metrics.h"
#include "router/call/stream_migration.h"
#include "router/call/token_relay.h"
#include "router/call/watchdog.h"
#include "router/config/router_config.h"
#include "router/placement/placement_ledger.h"
#include "router/placement/placement_policy.h"
#include "router/placement/rebalance_gate.h"
#include "router/pool/circuit_breaker.h"
#include "router/pool/worker_snapshot.h"

namespace pdserve::router {

class GenerateFsm {
 public:
  enum class State {
    kAdmitted,    // created; Start() has not run
    kPlacing,     // choosing a decode worker, or polling for one to come back
    kDecodeOpen,  // a Decode stream is open and has sent nothing yet
    kPrefilling,  // remote: the decode worker reserved KV; Prefill runs or is retried
    kStreaming,   // tokens are relayed to the client
    kCompleting,  // generation is over; the Prefill call has yet to resolve
    kDone,        // the outcome is decided; later events are ignored
  };
  static absl::string_view StateName(State state);

  // The worker pool as the state machine sees it.
  class Workers {
   public:
    virtual ~Workers() = default;
    virtual std::shared_ptr<const RegistrySnapshot> snapshot() const = 0;
    // Whether an RPC to the worker can be started now: one that left the
    // pool after the snapshot was taken cannot. The start action that
    // follows a true answer goes to that worker.
    virtual bool ReachDecode(const std::string& address) = 0;
    virtual bool ReachPrefill(const std::string& address) = 0;
  };

  // What the state machine reads and reports to; all must outlive it.
  struct Env {
    const RouterConfig* config = nullptr;
    const Tokenizer* tokenizer = nullptr;
    std::string model_fingerprint;
    Workers* workers = nullptr;
    std::atomic<uint64_t>* decode_ticket = nullptr;
    std::atomic<uint64_t>* prefill_ticket = nullptr;
    RouterMetrics* metrics = nullptr;    // null: no metrics
    Api api = Api::kGrpc;                // the metrics' label
    CircuitBreaker* breaker = nullptr;   // null: no circuit breaking
    PlacementLedger* ledger = nullptr;   // null: placements see only load reports
    RebalanceGate* rebalance = nullptr;  // null: no rebalancing
    const Clock* clock = nullptr;
    // Backoff jitter in [0, 1); null: uniformly random.
    std::function<double()> jitter;
  };

  struct DecodeStart {
    int attempt = 0;
    std::string address;
    v1::DecodeRequest request;
  };
  struct PrefillStart {
    int attempt = 0;
    std::string address;
    v1::PrefillRequest request;
  };
  struct TransferRetryStart {
    int attempt = 0;
    uint64_t placement = 0;  // handed back with its answer
    std::string address;     // the decode worker
    v1::RetryTransferRequest request;
  };
  // KV migration: the source decode worker (decode attempt `source`, whose
  // stream's channel carries the call) pushes the stream's KV to the
  // target's reservation.
  struct HandoffStart {
    int attempt = 0;
    int source = 0;
    v1::HandoffRequest request;
  };
  struct Backoff {
    absl::Duration delay;
    // Handed back when it fires. Only the latest backoff's id is current:
    // an older alarm (its backoff superseded by a failover's placement
    // poll, say) is ignored rather than acting early.
    uint64_t id = 0;
  };

  // What a transition decided, for GenerateCall to carry out in this order:
  // start RPCs and timers, cancel RPCs, resume reading, queue the
  // responses, then close the stream with `outcome` once they are written.
  struct Actions {
    std::optional<DecodeStart> start_decode;
    std::optional<PrefillStart> start_prefill;
    std::optional<TransferRetryStart> start_transfer_retry;
    std::optional<HandoffStart> start_handoff;
    std::optional<absl::Duration> arm_watchdog;
    std::optional<Backoff> start_backoff;
    std::optional<int> cancel_prefill;
    std::optional<int> cancel_transfer_retry;
    std::optional<int> cancel_decode;
    // A migration's source stream, once the move is over either way.
    std::optional<int> cancel_source;
    std::optional<int> cancel_handoff;
    // Rebalancing: ask decode attempt N's worker to offer this stream.
    std::optional<int> offer_migration;
    std::optional<int> resume_decode;
    std::vector<v1::GenerateResponse> responses;
    std::optional<grpc::Status> outcome;
  };

  explicit GenerateFsm(Env env);

  GenerateFsm(const GenerateFsm&) = delete;
  GenerateFsm& operator=(const GenerateFsm&) = delete;

  // Admits the request `id` (already validated, or the validation error):
  // places it. `deadline` is the request's (the client's, capped by
  // --request_timeout_ms); `client_deadline` the client's own.
  Actions Start(const std::string& id, absl::StatusOr<ValidatedRequest> request,
                absl::Time deadline, absl::Time client_deadline);

  // Decode stream `attempt` delivered an event / ended.
  Actions OnDecodeEvent(int attempt, const v1::DecodeEvent& event);
  Actions OnDecodeDone(int attempt, const grpc::Status& status);
  // Prefill call `attempt` ended; `response` is read only when OK.
  Actions OnPrefillDone(int attempt, const grpc::Status& status,
                        const v1::PrefillResponse& response);
  // RetryTransfer call `attempt` of `placement` ended; `epoch` is the new
  // one when OK.
  Actions OnTransferRetryDone(int attempt, uint64_t placement, const grpc::Status& status,
                              uint64_t epoch);
  // The OfferMigration call to decode attempt `attempt`'s worker ended
  // (its Migrating event, if any, comes on the stream).
  Actions OnOfferMigrationDone(int attempt, const grpc::Status& status);
  // Handoff call `attempt` ended.
  Actions OnHandoffDone(int attempt, const grpc::Status& status,
                        const v1::HandoffResponse& response);
  // A backoff timer of `placement` fired.
  Actions OnBackoffDone(uint64_t id);
  // The watchdog timer ran (`fired`) or was cancelled.
  Actions OnWatchdog(bool fired);
  // The client cancelled, or a write to it failed: it is gone.
  Actions OnClientCancel();
  Actions OnClientWriteFailed();

  // Whether `attempt` is the current decode attempt, whose events count.
  bool IsCurrentDecode(int attempt) const { return attempt == decode_ && decode_active_; }
  // Flow control: reading the current stream paused for a slow client
  // (meanwhile the watchdog does not judge the decode worker's silence).
  void PauseReads() { reads_paused_ = true; }
  bool reads_paused() const { return reads_paused_; }
  // The client drained its queue: resumes reading if paused.
  Actions OnClientDrained();

  State state() const { return state_; }
  bool done() const { return state_ == State::kDone; }
  const std::string& id() const { return id_; }

 private:
  absl::Time Now() const { return env_.clock->Now(); }
  bool DeadlinePassed() const { return Now() >= deadline_; }

  // Chooses the decode worker (and where the prompt is prefilled) and
  // opens the Decode stream; refusals of the chosen one loop to the next.
  void Place(Actions* a);
  PlacementQuery MakePlacementQuery(const std::vector<int32_t>& generated, absl::Time now) const;
  // The registry's snapshot with the ledger's unreported placements added.
  std::shared_ptr<const RegistrySnapshot> LedgerView() const;
  void HandleNoPlacement(const absl::Status& status, Actions* a);
  void CommitPlacement(const Placement& placement, const PlacementQuery& q,
                       const std::vector<int32_t>& generated, absl::Time now, Actions* a);
  // A failover (or a fall-back that gave up its reservation) found no
  // decode worker: true if it polls again.
  bool WaitForDecodeWorker(const grpc::Status& placement_failure, Actions* a);
  // The first event of the current decode attempt; false if it breaks the
  // protocol (the request then failed).
  bool AcceptFirstEvent(bool reserved, Actions* a);
  void HandleReserved(const v1::Reserved& reserved, Actions* a);
  void HandleTokens(const v1::Tokens& tokens, Actions* a);
  void HandleFinished(const v1::DecodeFinished& finished, Actions* a);
  // Rebalancing: the stream's worker is nearly full and another has room:
  // ask the worker to offer the stream (once per attempt, paced per worker).
  void MaybeRebalance(Actions* a);
  // The decode worker drains (or rebalances) and offers the stream: place
  // it on a target.
  void HandleMigrating(const v1::Migrating& migrating, Actions* a);
  // The target reserved: the source pushes the KV there.
  void StartHandoff(const v1::Reserved& reserved, Actions* a);
  // Ends the migration's source stream and its Handoff call.
  void AbandonMigration(Actions* a);
  // The move failed (`why`): the stream is recomputed elsewhere, as in a
  // decode failover.
  void RecomputeAfterFailedMigration(const std::string& why, Actions* a);
  void HandleDecodeEnd(const grpc::Status& status, Actions* a);
  // Decode failover: true if the request moved to another decode worker
  // (or completed on the tokens it has).
  bool TryFailover(const grpc::Status& status, Actions* a);
  // A remote attempt's stream ended before any token because its KV wait
  // expired: true if the request moved to local prefill.
  bool TryLocalPrefillAfterKvWait(const grpc::Status& status, Actions* a);

  // The prefill attempts: picks a prefill worker not tried yet and starts
  // Prefill under the reservation's epoch.
  void StartPrefill(Actions* a);
  void HandlePrefillFailure(const grpc::Status& status, Actions* a);
  void StartBackoff(absl::Duration delay, bool place, Actions* a);
  // After a prefill failure's backoff: RetryTransfer on the decode worker.
  void StartTransferRetry(Actions* a);
  // Every prefill worker failed or left, or the decode worker stopped
  // waiting for the KV (`why`, for logs): gives up the reservation and
  // places the request again with local prefill.
  void FallBackToLocalPrefill(const char* why, Actions* a);
  // Stops the current attempt's Prefill, backoff and RetryTransfer.
  void StopPrefillSide(Actions* a);

  void ArmWatchdog(Actions* a);
  void CheckPrefillSilence(Actions* a);
  void CheckDecodeSilence(Actions* a);

  // `attempt_started`: when the failed attempt was sent (circuit_breaker.h).
  void RecordWorkerFailure(const std::string& address, absl::Time attempt_started);
  void MaybeComplete(Actions* a);
  // Finished.usage.cached_prompt_tokens.
  int32_t CachedPromptTokens() const;
  // Finished.placement: the current attempt's workers, and how many moves
  // led there.
  v1::Placement FinalPlacement() const;
  void Fail(const grpc::Status& status, Actions* a);
  // The decode worker broke the protocol: INTERNAL, naming it.
  void FailProtocol(absl::string_view what, Actions* a);
  void PushStarted(const std::string& prefill_worker, Actions* a);
  void PushChunk(v1::Chunk chunk, Actions* a);

  const Env env_;
  const RetryOptions retry_;
  State state_ = State::kAdmitted;
  std::string id_;
  absl::Time deadline_;
  absl::Time client_deadline_;
  ValidatedRequest request_;
  std::unique_ptr<TokenRelay> relay_;
  RequestTimeline timeline_;

  // Decode attempts: decode_ is the current one's number, and
  // decode_active_ whether its stream is still ours to read (it may run on
  // after a stop string or a failure until it ends).
  int decode_attempts_ = 0;
  int decode_ = -1;
  bool decode_active_ = false;
  WorkerState decode_worker_;
  bool local_prefill_ = true;
  DecodeAttempts refusals_;
  // Bumped by every placement: timers and answers of an older one are
  // ignored.
  uint64_t placement_ = 0;
  int failovers_ = 0;
  // KV migration (generate_fsm_migration.cc).
  StreamMigration migration_;
  // Where the prompt was prefilled, once a move made local_prefill_ say
  // where the KV came from instead (Timings.prefill_mode).
  std::optional<bool> prefilled_locally_;
  // Set by a fall-back: every later placement prefills locally, for this
  // reason (logs).
  const char* local_fallback_why_ = nullptr;
  bool started_sent_ = false;
  // The current attempt holds its KV (first Tokens seen).
  bool kv_committed_ = false;
  // Set when a decode worker of this request failed: until then a placement
  // that finds no live decode worker polls for one.
  absl::Time failover_wait_until_;
  // Set by a fall-back to local prefill, which gives up this request's own
  // reservation: until then a placement that every decode worker refuses
  // for lack of blocks polls too (the blocks come back once the cancelled
  // stream is torn down on the worker).
  absl::Time release_wait_until_;
  // Where that reservation was, and whether its worker's first refusal has
  // already moved the window (once: see HandleDecodeEnd).
  std::string released_on_;
  bool release_wait_extended_ = false;
  absl::Time decode_started_;
  absl::Time last_decode_event_;  // of the current attempt (or its start)
  bool reads_paused_ = false;

  PrefillAttempts prefill_;
  uint32_t cached_prefix_tokens_ = 0;
  // A pending backoff timer, and what it does when it fires. A stale one
  // (superseded placement, stopped prefill side) does nothing.
  enum class BackoffFor { kNone, kTransferRetry, kPlacement };
  BackoffFor backoff_ = BackoffFor::kNone;
  uint64_t backoff_id_ = 0;         // of the latest backoff started
  uint64_t backoff_placement_ = 0;  // the placement it was started under

  Watchdog watchdog_;

  // Why generation ended on the decode side.
  v1::FinishReason reason_ = v1::FINISH_REASON_UNSPECIFIED;
  v1::DecodeFinished decode_finished_;
  // Generation ended because every token arrived before the stream broke
  // (DecodeFinished lost): the breaker keeps the failure.
  bool decode_broke_ = false;
  bool client_gone_ = false;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_GENERATE_FSM_H_
