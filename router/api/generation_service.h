// GenerationService: the public pdserve.v1.Generation API (gRPC callback
// service). Every call is authenticated first when bearer tokens are on.
// The methods are registered raw and parse their own requests
// (common/rpc/raw_message.h), so a body that does not parse gets
// INVALID_ARGUMENT and a log line instead of gRPC's bare UNIMPLEMENTED.
// Generate admits a request (bounded: beyond --max_queue calls in flight,
// or --max_streams_per_client of one client, the answer is
// RESOURCE_EXHAUSTED at once) and hands it to a
// GenerateCall, which owns the rest of its life. Tokenize and GetModelInfo
// answer from the router's own tokenizer-only model.
//
// Thread-safe; gRPC calls it from its callback threads. The model, config
// and registry must outlive it, and the service must outlive every call:
// WaitForCalls() (after the server stopped accepting RPCs) blocks until the
// last GenerateCall, including its RPCs to workers, is gone.
#ifndef PDSERVE_ROUTER_API_GENERATION_SERVICE_H_
#define PDSERVE_ROUTER_API_GENERATION_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/model/model_card.h"
#include "pdserve/v1/generation.grpc.pb.h"
#include "router/api/bearer_auth.h"
#include "router/api/client_limiter.h"
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
              v1::Generation::WithRawCallbackMethod_GetModelInfo<v1::Generation::Service>>> {
 public:
  // `metrics` (optional) must outlive the service.
  GenerationService(const ModelCard& model, const RouterConfig& config, WorkerRegistry* registry,
                    RouterMetrics* metrics = nullptr);

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* body) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* body,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* body,
                                         grpc::ByteBuffer* response) override;

  // Requires a bearer token on every call from now on; call before the
  // server starts.
  void EnableAuth(BearerAuth auth) { auth_.emplace(std::move(auth)); }
  // Believes the client address and API of calls carrying `key`: the HTTP
  // front's (router/api/front_metadata.h). Call before the server
  // starts.
  void TrustFront(std::string key) { front_key_ = std::move(key); }

  void WaitForCalls();
  int calls_in_flight() const;

 private:
  // Who is calling (bearer identity, else peer IP), or UNAUTHENTICATED.
  absl::StatusOr<std::string> Identify(const grpc::CallbackServerContext& context) const;
  // Whether the call came through the HTTP front, which then says who its
  // client is.
  bool FromFront(const grpc::CallbackServerContext& context) const;
  // The caller's address (its HTTP client's, through the front).
  std::string PeerOf(const grpc::CallbackServerContext& context) const;
  // Authenticates and parses a unary call's body.
  absl::Status Accept(const grpc::CallbackServerContext& context, const grpc::ByteBuffer& body,
                      google::protobuf::Message* request) const;
  absl::StatusOr<v1::TokenizeResponse> Tokenized(const v1::TokenizeRequest& request) const;
  v1::ModelInfo DescribeModel() const;
  bool TryAdmit();
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
  std::string front_key_;  // "" = no front
  GenerateCall::Env env_;

  mutable absl::Mutex mu_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_API_GENERATION_SERVICE_H_
