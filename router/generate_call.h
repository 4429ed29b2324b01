// GenerateCall: one Generation.Generate request, from validation to the
// final status — the router's request state machine (docs/PROTOCOL.md,
// "Router request state machine"):
//
//   validate -> place (pick decode worker D, choose local/remote prefill)
//     -> Decode stream open --RESOURCE_EXHAUSTED/UNAVAILABLE before any
//        event--> place again without D (until every D refused)
//     -> Reserved: pick prefill worker P, call Prefill (remote only)
//        --Prefill failed while D waits for KV--> back off, RetryTransfer on
//        D (new epoch, same blocks), Prefill on another P (prefill retry)
//     -> Tokens: relay as chunks (dedup, detokenize, stop strings)
//        --D's stream broke--> place again without D, with the prompt plus
//        the tokens relayed so far (decode failover)
//     -> DecodeFinished or stop match, and the Prefill call resolved
//     -> Finished{reason, usage, timings, placement} -> OK
//   Any other failure, an exhausted retry budget, client cancel or deadline
//   cancels D's stream and P's call and ends the client stream with a
//   canonical status.
//
// Threading: every gRPC reaction (server writes/cancel, decode events,
// prefill completion) locks mu_, advances the state and collects the gRPC
// operations to issue (Actions); those run after mu_ is released, because
// gRPC may run another reaction inline. Server writes are serialised: one
// StartWrite is outstanding at a time and later messages queue (ResponseQueue).
//
// Lifetime: the object deletes itself when its last "hold" is released.
// Holds: one for the server RPC (released in OnDone, which gRPC calls after
// Finish and every server reaction), one per client RPC it started
// (released at the end of that RPC's completion: DecodeStream::OnDone,
// the Prefill and RetryTransfer callbacks), one per backoff alarm (released
// when it fires; alarms are short and never cancelled), one while the decode
// watchdog is armed (released when it fires or is cancelled at Finish), and
// one for Start() itself. So no reaction can
// run on a deleted object, and the decode streams, prefill call and their
// contexts outlive every RPC that uses them.
#ifndef PDSERVE_ROUTER_GENERATE_CALL_H_
#define PDSERVE_ROUTER_GENERATE_CALL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/model/model.h"
#include "grpcpp/alarm.h"
#include "grpcpp/grpcpp.h"
#include "pdserve/v1/generation.grpc.pb.h"
#include "router/circuit_breaker.h"
#include "router/decode_attempts.h"
#include "router/decode_stream.h"
#include "router/placement_ledger.h"
#include "router/prefill_call.h"
#include "router/request_timeline.h"
#include "router/request_validator.h"
#include "router/response_queue.h"
#include "router/retry_policy.h"
#include "router/router_config.h"
#include "router/router_metrics.h"
#include "router/token_relay.h"
#include "router/transfer_retry_call.h"
#include "router/worker_registry.h"

namespace pdserve::router {

class GenerateCall : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                     private DecodeStream::Observer {
 public:
  // What every call shares; owned by GenerationService, which outlives all
  // calls (it waits for on_destroyed of each).
  struct Env {
    const Model* model = nullptr;
    const RouterConfig* config = nullptr;
    const RequestValidator* validator = nullptr;
    WorkerRegistry* registry = nullptr;
    std::atomic<uint64_t>* decode_ticket = nullptr;
    std::atomic<uint64_t>* prefill_ticket = nullptr;
    RouterMetrics* metrics = nullptr;   // null: no metrics
    CircuitBreaker* breaker = nullptr;  // null: no circuit breaking
    PlacementLedger* ledger = nullptr;  // null: placements see only load reports
    std::function<void()> on_destroyed;
  };

  // Begins handling `request` and returns the reactor to hand to gRPC.
  static GenerateCall* Create(const Env& env, grpc::CallbackServerContext* context,
                              const v1::GenerateRequest& request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // The gRPC operations a transition decided on, issued by Run() once mu_
  // is released.
  struct Actions {
    DecodeStream* start_decode = nullptr;
    std::shared_ptr<v1::DecodeWorker::Stub> decode_stub;
    PrefillCall* start_prefill = nullptr;
    std::shared_ptr<v1::PrefillWorker::Stub> prefill_stub;
    TransferRetryCall* start_retry = nullptr;
    std::shared_ptr<v1::DecodeWorker::Stub> retry_stub;
    uint64_t retry_placement = 0;
    grpc::Alarm* start_watchdog = nullptr;
    absl::Duration watchdog_delay;
    grpc::Alarm* cancel_watchdog = nullptr;
    grpc::Alarm* start_backoff = nullptr;
    absl::Duration backoff_delay;
    uint64_t backoff_placement = 0;
    DecodeStream* cancel_decode = nullptr;
    PrefillCall* cancel_prefill = nullptr;
    TransferRetryCall* cancel_retry = nullptr;
    DecodeStream* resume_decode = nullptr;
    const grpc::ByteBuffer* write = nullptr;
    std::optional<grpc::Status> finish;
  };

  GenerateCall(const Env& env, grpc::CallbackServerContext* context);
  ~GenerateCall() override;

  void Start(const v1::GenerateRequest& request);
  bool OnDecodeEvent(DecodeStream* stream, const v1::DecodeEvent& event) override;
  void OnDecodeDone(DecodeStream* stream, const grpc::Status& status) override;
  void OnPrefillDone(PrefillCall* call, const grpc::Status& status);
  void OnBackoffDone(uint64_t placement);
  void OnWatchdog(bool fired);
  void OnRetryTransferDone(uint64_t placement, TransferRetryCall* call, const grpc::Status& status);

  // The state transitions; all run under mu_.
  void Place(Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleReserved(const v1::Reserved& reserved, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleTokens(const v1::Tokens& tokens, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleFinished(const v1::DecodeFinished& f, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleDecodeEnd(const grpc::Status& status, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Prefill retry (generate_call_retry.cc): picks a prefill worker not
  // tried yet and starts Prefill under reserved_'s epoch.
  void StartPrefill(Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandlePrefillFailure(const grpc::Status& status, Actions* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every prefill worker failed or left, or the decode worker stopped
  // waiting for the KV (`why`, for logs): cancel D's reservation and place
  // the request again with local prefill.
  void FallBackToLocalPrefill(const char* why, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A remote attempt's decode stream ended before any token because its KV
  // wait expired: true if the request moved to local prefill.
  bool TryLocalPrefillAfterKvWait(const grpc::Status& status, Actions* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decode failover: true if the request moved to another decode worker.
  bool TryFailover(const grpc::Status& status, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stops the current attempt's prefill, backoff and RetryTransfer.
  void StopPrefillSide(Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Arms a backoff alarm; when it fires, OnBackoffDone places the request
  // again (`place`) or continues the prefill retry.
  void StartBackoff(absl::Duration delay, bool place, Actions* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a prefill failure's backoff: RetryTransfer on the decode worker.
  void StartTransferRetry(Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A failover found no live decode worker: true if it polls again.
  bool WaitForDecodeWorker(const grpc::Status& placement_failure, Actions* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `attempt_started`: when the failed attempt was sent (circuit_breaker.h).
  void RecordWorkerFailure(const std::string& address, absl::Time attempt_started)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Watchdog (generate_call_watchdog.cc): a worker that hangs (SIGSTOP, a
  // wedged host) keeps its calls open but silent, so only the request
  // deadline would end them. While a decode attempt runs, every stale_after
  // the watchdog checks whether both its stream and the worker's load
  // reports went silent — then the attempt fails over as if the stream had
  // broken — and whether the prefill worker's load reports did — then the
  // prefill is retried as if it had failed with UNAVAILABLE — or say that
  // it computed no prompt token for the attempt timeout (a wedged engine
  // behind a live server) — then it is retried as if it had timed out.
  void ArmWatchdog(Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why the current decode (prefill) attempt counts as hung, or OK.
  grpc::Status DecodeSilence(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A check whose alarm fires more than stale_after / 2 late is skipped: the
  // router itself was stalled, so no worker's silence can be judged.
  grpc::Status PrefillSilence(const RegistrySnapshot& snapshot, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Notes the prefill worker's progress counter; DEADLINE_EXCEEDED when it
  // stood still for the attempt timeout.
  grpc::Status PrefillStall(const RegistrySnapshot& snapshot, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long until the watchdog should look again.
  absl::Duration WatchdogDelay() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckDecodeSilence(Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckPrefillSilence(Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first event of the accepted decode attempt; false if it breaks the
  // protocol (the call then failed).
  bool AcceptFirstEvent(bool reserved, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeComplete(Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finished.usage.cached_prompt_tokens.
  int32_t CachedPromptTokens() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fail(const grpc::Status& status, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finished.placement: the current attempt's workers, and how many moves
  // led there.
  v1::Placement FinalPlacement() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The decode worker broke the protocol: INTERNAL, naming it.
  void FailProtocol(absl::string_view what, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushStarted(const std::string& prefill_worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushChunk(v1::Chunk chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Collects the next write, or Finish once the outcome is decided and
  // every queued message is written (ResponseQueue).
  void Pump(Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Issues the collected gRPC operations; called without mu_.
  void Run(Actions& a);
  // Drops one hold; the last one deletes the call. Called without mu_ and
  // as the last statement of a reaction.
  void Release();

  const Env env_;
  const RetryOptions retry_;
  grpc::CallbackServerContext* const server_context_;
  // Written once in Start() before any RPC begins, then read-only.
  std::string id_;
  std::chrono::system_clock::time_point deadline_;

  absl::Mutex mu_;
  int holds_ ABSL_GUARDED_BY(mu_) = 2;  // the server RPC and Start()

  ValidatedRequest request_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<TokenRelay> relay_ ABSL_GUARDED_BY(mu_);
  RequestTimeline timeline_ ABSL_GUARDED_BY(mu_);

  // Decode attempts, oldest first; decode_ is the current one.
  std::vector<std::unique_ptr<DecodeStream>> streams_ ABSL_GUARDED_BY(mu_);
  DecodeStream* decode_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool decode_active_ ABSL_GUARDED_BY(mu_) = false;
  bool event_seen_ ABSL_GUARDED_BY(mu_) = false;  // on the current attempt
  WorkerState decode_worker_ ABSL_GUARDED_BY(mu_);
  bool local_prefill_ ABSL_GUARDED_BY(mu_) = true;
  DecodeAttempts attempts_ ABSL_GUARDED_BY(mu_);
  // Bumped by every Place(): alarms and RPC callbacks of an older placement
  // are ignored.
  uint64_t placement_ ABSL_GUARDED_BY(mu_) = 0;
  int failovers_ ABSL_GUARDED_BY(mu_) = 0;
  // Set by FallBackToLocalPrefill: every later placement prefills locally,
  // for this reason (logs).
  const char* local_fallback_why_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool started_sent_ ABSL_GUARDED_BY(mu_) = false;
  // The current attempt holds KV from a prefill worker (first Tokens seen).
  bool kv_committed_ ABSL_GUARDED_BY(mu_) = false;

  // The reservation of the current remote attempt; its epoch moves on with
  // every prefill retry.
  v1::Reserved reserved_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> prefill_failed_ ABSL_GUARDED_BY(mu_);
  int prefill_retries_ ABSL_GUARDED_BY(mu_) = 0;
  // Backoff timers, oldest first; each lives until its callback ran. They
  // are never cancelled (a backoff is short): a stale one finds its
  // placement gone or the call terminal and does nothing.
  std::vector<std::unique_ptr<grpc::Alarm>> alarms_ ABSL_GUARDED_BY(mu_);
  grpc::Alarm* backoff_ ABSL_GUARDED_BY(mu_) = nullptr;  // pending, if any
  bool backoff_places_ ABSL_GUARDED_BY(mu_) = false;     // what it does when it fires
  // Set when a decode worker of this request failed: until then a placement
  // that finds no live decode worker polls for one (WaitForDecodeWorker).
  absl::Time failover_wait_until_ ABSL_GUARDED_BY(mu_);
  // Set by a fall-back to local prefill, which gives up this request's own
  // reservation: until then a placement that every decode worker refuses
  // for lack of blocks polls too (the blocks come back once the cancelled
  // stream is torn down on the worker).
  absl::Time release_wait_until_ ABSL_GUARDED_BY(mu_);
  // When the current decode attempt (Decode stream) and prefill call began.
  absl::Time decode_started_ ABSL_GUARDED_BY(mu_);
  absl::Time prefill_started_ ABSL_GUARDED_BY(mu_);
  // The prefill worker's LoadReport.prefill_progress last seen, and
  // when it was first seen at that value (PrefillStall).
  uint64_t prefill_progress_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time prefill_progress_at_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<TransferRetryCall>> retries_ ABSL_GUARDED_BY(mu_);
  TransferRetryCall* retry_in_flight_ ABSL_GUARDED_BY(mu_) = nullptr;

  // Prefill calls, oldest first; prefill_ is the current one.
  std::vector<std::unique_ptr<PrefillCall>> prefills_ ABSL_GUARDED_BY(mu_);
  PrefillCall* prefill_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool prefill_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool prefill_ok_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t cached_prefix_tokens_ ABSL_GUARDED_BY(mu_) = 0;

  // Generation is over on the decode side (DecodeFinished or a stop match).
  bool decode_done_ ABSL_GUARDED_BY(mu_) = false;
  // ... because every token arrived before the stream broke (DecodeFinished
  // lost): the breaker keeps the failure.
  bool decode_broke_ ABSL_GUARDED_BY(mu_) = false;
  v1::FinishReason reason_ ABSL_GUARDED_BY(mu_) = v1::FINISH_REASON_UNSPECIFIED;
  v1::DecodeFinished decode_finished_ ABSL_GUARDED_BY(mu_);

  // The outcome is decided (out_ is closed); later events are ignored.
  bool terminal_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  ResponseQueue out_ ABSL_GUARDED_BY(mu_);
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;

  // The decode watchdog's alarms, used in turn: each arm makes a new one in
  // the slot whose callback ran long ago (one is never re-Set).
  std::unique_ptr<grpc::Alarm> watchdogs_[2] ABSL_GUARDED_BY(mu_);
  int watchdog_slot_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time watchdog_due_ ABSL_GUARDED_BY(mu_);          // when the armed watchdog should fire
  grpc::Alarm* watchdog_ ABSL_GUARDED_BY(mu_) = nullptr;  // armed, if any
  // The current attempt's last event (or its start).
  absl::Time last_decode_event_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_GENERATE_CALL_H_
