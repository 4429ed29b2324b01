// WorkerCall: one unary RPC the router makes to a worker for a request —
// Prefill on a prefill worker; RetryTransfer, Handoff and OfferMigration
// on a decode worker. One template for every kind, so a new worker RPC is
// a type alias here and a line in GenerateCall::Prepare. Owns the context,
// request and response the RPC needs while in flight.
//
// Lifetime: the owner (GenerateCall) keeps it alive until `done` has run.
// Cancel() may be called from any thread at any time (before the RPC
// starts, while it runs or after it ended).
#ifndef PDSERVE_ROUTER_CALL_WORKER_CALL_H_
#define PDSERVE_ROUTER_CALL_WORKER_CALL_H_

#include <chrono>
#include <functional>
#include <memory>
#include <utility>

#include "grpcpp/client_context.h"
#include "pdserve/v1/worker.grpc.pb.h"

namespace pdserve::router {

template <typename Service, typename Request, typename Response>
class WorkerCall {
 public:
  using Stub = typename Service::Stub;
  using Async = typename Service::StubInterface::async_interface;
  // The callback-API method of the stub, e.g. &Async::Prefill.
  using Method = void (Async::*)(grpc::ClientContext*, const Request*, Response*,
                                 std::function<void(grpc::Status)>);

  WorkerCall(Method method, Request request, std::chrono::system_clock::time_point deadline)
      : method_(method), request_(std::move(request)) {
    context_.set_deadline(deadline);
  }

  // Keeps `stub` (and so its channel) until this is destroyed: the worker
  // may leave the registry's pool while the RPC runs.
  void Start(std::shared_ptr<Stub> stub, std::function<void(grpc::Status)> done) {
    stub_ = std::move(stub);
    (stub_->async()->*method_)(&context_, &request_, &response_, std::move(done));
  }
  void Cancel() { context_.TryCancel(); }

  // Valid once `done` ran with an OK status.
  const Response& response() const { return response_; }

 private:
  const Method method_;
  const Request request_;
  std::shared_ptr<Stub> stub_;  // set once, in Start()
  grpc::ClientContext context_;
  Response response_;
};

using PrefillCall = WorkerCall<v1::PrefillWorker, v1::PrefillRequest, v1::PrefillResponse>;
using TransferRetryCall =
    WorkerCall<v1::DecodeWorker, v1::RetryTransferRequest, v1::RetryTransferResponse>;
using HandoffCall = WorkerCall<v1::DecodeWorker, v1::HandoffRequest, v1::HandoffResponse>;
using OfferMigrationCall =
    WorkerCall<v1::DecodeWorker, v1::OfferMigrationRequest, v1::OfferMigrationResponse>;

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_WORKER_CALL_H_
