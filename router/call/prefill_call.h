// PrefillCall: one PrefillWorker.Prefill RPC issued with the async stub.
// Owns the context, request and response the RPC needs while in flight.
//
// Lifetime: the owner (GenerateCall) keeps it alive until `done` has run.
// Cancel() may be called from any thread at any time (before the RPC
// starts, while it runs or after it ended).
#ifndef PDSERVE_ROUTER_CALL_PREFILL_CALL_H_
#define PDSERVE_ROUTER_CALL_PREFILL_CALL_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "grpcpp/client_context.h"
#include "pdserve/v1/worker.grpc.pb.h"

namespace pdserve::router {

class PrefillCall {
 public:
  PrefillCall(std::string address, v1::PrefillRequest request,
              std::chrono::system_clock::time_point deadline)
      : address_(std::move(address)), request_(std::move(request)) {
    context_.set_deadline(deadline);
  }

  // Keeps `stub` (and so its channel) until this is destroyed: the worker
  // may leave the registry's pool while the RPC runs.
  void Start(std::shared_ptr<v1::PrefillWorker::Stub> stub,
             std::function<void(grpc::Status)> done) {
    stub_ = std::move(stub);
    stub_->async()->Prefill(&context_, &request_, &response_, std::move(done));
  }
  void Cancel() { context_.TryCancel(); }

  const std::string& address() const { return address_; }
  // Valid once `done` ran with an OK status.
  const v1::PrefillResponse& response() const { return response_; }

 private:
  const std::string address_;
  const v1::PrefillRequest request_;
  std::shared_ptr<v1::PrefillWorker::Stub> stub_;  // set once, in Start()
  grpc::ClientContext context_;
  v1::PrefillResponse response_;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_PREFILL_CALL_H_
