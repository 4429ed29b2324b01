// TransferRetryCall: one DecodeWorker.RetryTransfer RPC, which moves a
// decode worker's KV reservation to a new epoch before the router retries
// the prefill on another prefill worker. Owns what the RPC needs in flight.
//
// Lifetime: the owner (GenerateCall) keeps it alive until `done` has run.
// Cancel() may be called from any thread at any time.
#ifndef PDSERVE_ROUTER_CALL_TRANSFER_RETRY_CALL_H_
#define PDSERVE_ROUTER_CALL_TRANSFER_RETRY_CALL_H_

#include <chrono>
#include <functional>
#include <memory>
#include <utility>

#include "grpcpp/client_context.h"
#include "pdserve/v1/worker.grpc.pb.h"

namespace pdserve::router {

class TransferRetryCall {
 public:
  TransferRetryCall(v1::RetryTransferRequest request,
                    std::chrono::system_clock::time_point deadline)
      : request_(std::move(request)) {
    context_.set_deadline(deadline);
  }

  void Start(std::shared_ptr<v1::DecodeWorker::Stub> stub, std::function<void(grpc::Status)> done) {
    stub_ = std::move(stub);
    stub_->async()->RetryTransfer(&context_, &request_, &response_, std::move(done));
  }
  void Cancel() { context_.TryCancel(); }

  // Valid once `done` ran with an OK status.
  uint64_t epoch() const { return response_.epoch(); }

 private:
  const v1::RetryTransferRequest request_;
  std::shared_ptr<v1::DecodeWorker::Stub> stub_;  // set once, in Start()
  grpc::ClientContext context_;
  v1::RetryTransferResponse response_;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_TRANSFER_RETRY_CALL_H_
