// GenerateClient: the client end of one GenerateCall, whichever door the
// request came in by — a gRPC Generate stream (router/api's
// GrpcGenerateStream) or a front inside the router process (the OpenAI
// HTTP API). The call writes its messages and its final status here; the
// door reports back through GenerateCall::OnWriteDone, OnClientCancel and
// by dropping its GenerateCall::Ref.
//
// Threading: the call makes one Write at a time (the next only after the
// last completed) and Finish once, after the last write completed; never
// while holding its own lock, so a door may complete inline.
#ifndef PDSERVE_ROUTER_CALL_GENERATE_CLIENT_H_
#define PDSERVE_ROUTER_CALL_GENERATE_CLIENT_H_

#include "grpcpp/support/status.h"
#include "pdserve/v1/generation.pb.h"

namespace pdserve::router {

class GenerateClient {
 public:
  virtual ~GenerateClient() = default;

  // Delivers `message`. Returns true when the door is done with it now;
  // false when it completes later with GenerateCall::OnWriteDone. The
  // message stays valid until the write completed.
  virtual bool Write(const v1::GenerateResponse& message) = 0;
  // Ends the request with `status`. The call uses the client no more.
  virtual void Finish(const grpc::Status& status) = 0;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_GENERATE_CLIENT_H_
