// GenerateCall: one Generation.Generate request, from validation to the
// final status — the router's request state machine (docs/PROTOCOL.md,
// "Router request state machine"):
//
//   validate -> place (pick decode worker D, choose local/remote prefill)
//     -> Decode stream open --RESOURCE_EXHAUSTED/UNAVAILABLE before any
//        event--> place again without D (until every D refused)
//     -> Reserved: pick prefill worker P, call Prefill (remote only)
//     -> Tokens: relay as chunks (dedup, detokenize, stop strings)
//     -> DecodeFinished or stop match, and the Prefill call resolved
//     -> Finished{reason, usage, timings} -> OK
//   Any failure, client cancel or deadline cancels D's stream and P's call
//   and ends the client stream with a canonical status.
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
// the Prefill callback), and one for Start() itself. So no reaction can
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
#include "common/model.h"
#include "grpcpp/grpcpp.h"
#include "pdserve/v1/generation.grpc.pb.h"
#include "router/decode_attempts.h"
#include "router/decode_stream.h"
#include "router/prefill_call.h"
#include "router/request_timeline.h"
#include "router/request_validator.h"
#include "router/response_queue.h"
#include "router/router_config.h"
#include "router/router_metrics.h"
#include "router/token_relay.h"
#include "router/worker_registry.h"

namespace pdserve {

class GenerateCall : public grpc::ServerWriteReactor<v1::GenerateResponse>,
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
    RouterMetrics* metrics = nullptr;  // null: no metrics
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
    DecodeStream* cancel_decode = nullptr;
    PrefillCall* cancel_prefill = nullptr;
    DecodeStream* resume_decode = nullptr;
    const v1::GenerateResponse* write = nullptr;
    std::optional<grpc::Status> finish;
  };

  GenerateCall(const Env& env, grpc::CallbackServerContext* context);
  ~GenerateCall() override;

  void Start(const v1::GenerateRequest& request);
  bool OnDecodeEvent(DecodeStream* stream, const v1::DecodeEvent& event) override;
  void OnDecodeDone(DecodeStream* stream, const grpc::Status& status) override;
  void OnPrefillDone(const grpc::Status& status);

  // The state transitions; all run under mu_.
  void Place(Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleReserved(const v1::Reserved& reserved, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleTokens(const v1::Tokens& tokens, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleFinished(const v1::DecodeFinished& f, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleDecodeEnd(const grpc::Status& status, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first event of the accepted decode attempt; false if it breaks the
  // protocol (the call then failed).
  bool AcceptFirstEvent(bool reserved, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeComplete(Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fail(const grpc::Status& status, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
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

  std::unique_ptr<PrefillCall> prefill_ ABSL_GUARDED_BY(mu_);
  bool prefill_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool prefill_ok_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t cached_prefix_tokens_ ABSL_GUARDED_BY(mu_) = 0;

  // Generation is over on the decode side (DecodeFinished or a stop match).
  bool decode_done_ ABSL_GUARDED_BY(mu_) = false;
  v1::FinishReason reason_ ABSL_GUARDED_BY(mu_) = v1::FINISH_REASON_UNSPECIFIED;
  v1::DecodeFinished decode_finished_ ABSL_GUARDED_BY(mu_);

  // The outcome is decided (out_ is closed); later events are ignored.
  bool terminal_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  ResponseQueue out_ ABSL_GUARDED_BY(mu_);
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pdserve

#endif  // PDSERVE_ROUTER_GENERATE_CALL_H_
