// DecodeUnaryCall: one unary DecodeWorker RPC that a migration makes on a
// stream's worker — Handoff (the source pushes the stream's KV to the
// target's reservation) and OfferMigration (the router asks a worker whose
// KV pool is nearly full to offer a stream). Owns what the RPC needs in
// flight.
//
// Lifetime: the owner (GenerateCall) keeps it alive until `done` has run.
// Cancel() may be called from any thread at any time.
#ifndef PDSERVE_ROUTER_CALL_DECODE_UNARY_CALL_H_
#define PDSERVE_ROUTER_CALL_DECODE_UNARY_CALL_H_

#include <chrono>
#include <functional>
#include <memory>
#include <utility>

#include "grpcpp/client_context.h"
#include "pdserve/v1/worker.grpc.pb.h"

namespace pdserve::router {

template <typename Request, typename Response>
class DecodeUnaryCall {
 public:
  // The callback-API method of the stub, e.g. &Async::Handoff.
  using Async = v1::DecodeWorker::StubInterface::async_interface;
  using Method = void (Async::*)(grpc::ClientContext*, const Request*, Response*,
                                 std::function<void(grpc::Status)>);

  DecodeUnaryCall(Method method, Request request, std::chrono::system_clock::time_point deadline)
      : method_(method), request_(std::move(request)) {
    context_.set_deadline(deadline);
  }

  // `stub`: the one the stream's Decode call runs on (a draining worker may
  // already have left the registry's pool).
  void Start(std::shared_ptr<v1::DecodeWorker::Stub> stub, std::function<void(grpc::Status)> done) {
    stub_ = std::move(stub);
    (stub_->async()->*method_)(&context_, &request_, &response_, std::move(done));
  }
  void Cancel() { context_.TryCancel(); }

  // Valid once `done` ran with an OK status.
  const Response& response() const { return response_; }

 private:
  const Method method_;
  const Request request_;
  std::shared_ptr<v1::DecodeWorker::Stub> stub_;  // set once, in Start()
  grpc::ClientContext context_;
  Response response_;
};

using HandoffCall = DecodeUnaryCall<v1::HandoffRequest, v1::HandoffResponse>;
using OfferMigrationCall =
    DecodeUnaryCall<v1::OfferMigrationRequest, v1::OfferMigrationResponse>;

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_DECODE_UNARY_CALL_H_
