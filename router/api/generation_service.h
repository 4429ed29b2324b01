// GenerationService: the public pdserve.v1.Generation API (gRPC callback
// service). Every call is authenticated first when bearer tokens are on.
// The methods are registered raw and parse their own requests
// (common/rpc/raw_message.h), so a body that does not parse gets
// INVALID_ARGUMENT and a log line instead of gRPC's bare UNIMPLEMENTED.
// Generate admits a request (bounded: beyond --max_queue calls in flight,
// or --max_streams_per_client of one client, the answer is
// RESOURCE_EXHAUSTED at once) and hands it to a GenerateCall, which owns
// the rest of its life; the stream is its GrpcGenerateStream. The service
// is also the router's in-process door (LocalGeneration), through which
// the OpenAI front admits its requests the same way. Tokenize and
// GetModelInfo answer from the router's model card.
//
// Thread-safe; gRPC calls it from its callback threads. The model, config
// and registry must outlive it, and the service must outlive every call:
// WaitForCalls() (after the server stopped accepting RPCs) blocks until the
// last GenerateCall, including its RPCs to workers, is gone.
#ifndef PDSERVE_ROUTER_API_GENERATION_SERVICE_H_
#define PDSERVE_ROUTER_API_GENERATION_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/model/model_card.h"
#include "pdserve/v1/generation.grpc.pb.h"
#include "router/api/bearer_auth.h"
#include "router/api/client_limiter.h"
#include "router/api/local_generation.h"
#include "router/call/generate_call.h"
#include "router/call/request_validator.h"
#include "router/config/router_config.h"
#include "router/placement/placement_ledger.h"
#include "router/placement/rebalance_gate.h"
#include "router/pool/circuit_breaker.h"
#include "router/pool/worker_registry.h"

namespace pdserve::router {

class GenerationService final
    : public v1::Generation::WithRawCallbackMethod_Generate<
          v1::Generation::WithRawCallbackMethod_Tokenize<
              v1::Generation::WithRawCallbackMethod_GetModelInfo<v1::Generation::Service>>>,
      public LocalGeneration {
 public:
  // `metrics` and `grammars` (optional: structured-output constraints are
  // then checked only for size) must outlive the service.
  GenerationService(const ModelCard& model, const RouterConfig& config, WorkerRegistry* registry,
                    RouterMetrics* metrics = nullptr, GrammarCompiler* grammars = nullptr);

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* body) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* body,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* body,
                                         grpc::ByteBuffer* response) override;

  // LocalGeneration.
  absl::StatusOr<std::shared_ptr<Call>> Open(const Caller& caller, GenerateClient* client) override;
  absl::StatusOr<v1::ModelInfo> ModelInfo(const Caller& caller) override;

  // Requires a bearer token on every call from now on; call before the
  // server starts.
  void EnableAuth(BearerAuth auth) { auth_.emplace(std::move(auth)); }

  // Refuses every new request (UNAVAILABLE) from now on: the router is
  // shutting down.
  void StopAdmitting();
  // Blocks until no call is left, or until `deadline`.
  void WaitForCalls(absl::Time deadline = absl::InfiniteFuture());
  int calls_in_flight() const;

 private:
  // Who is calling (bearer identity, else its host), or UNAUTHENTICATED.
  absl::StatusOr<std::string> Identify(const Caller& caller) const;
  // Takes an admission slot for client `who`, or RESOURCE_EXHAUSTED.
  absl::Status Acquire(const std::string& who);
  // A call of admitted client `who`, answering `client`.
  GenerateCall::Ref NewCall(const Caller& caller, const std::string& who, GenerateClient* client,
                            absl::Time client_deadline);
  // Counts a request refused before a call began.
  void CountRefused(const absl::Status& status, Api api) const;
  // Authenticates and parses a unary call's body.
  absl::Status Accept(const grpc::CallbackServerContext& context, const grpc::ByteBuffer& body,
                      google::protobuf::Message* request) const;
  absl::StatusOr<v1::TokenizeResponse> Tokenized(const v1::TokenizeRequest& request) const;
  v1::ModelInfo DescribeModel() const;
  // Takes an admission slot, or says why not.
  absl::Status TryAdmit();
  void OnCallDestroyed();

  const ModelCard& model_;
  const RouterConfig& config_;
  WorkerRegistry* const registry_;
  RouterMetrics* const metrics_;
  const RequestValidator validator_;
  std::atomic<uint64_t> decode_ticket_{0};
  std::atomic<uint64_t> prefill_ticket_{0};
  CircuitBreaker breaker_;
  PlacementLedger ledger_;
  RebalanceGate rebalance_;
  ClientLimiter clients_;
  std::optional<BearerAuth> auth_;
  GenerateCall::Env env_;

  mutable absl::Mutex mu_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool admitting_ ABSL_GUARDED_BY(mu_) = true;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_API_GENERATION_SERVICE_H_
