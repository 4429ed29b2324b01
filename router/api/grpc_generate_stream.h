// GrpcGenerateStream: the gRPC door of a GenerateCall — the server stream
// of one Generation.Generate. It serialises the call's messages for the
// raw method (common/rpc/raw_message.h), reports write completions and the
// client's cancel to the call, and holds the call's Ref until gRPC's
// OnDone, after which nothing reaches the call from this side.
//
// Lifetime: deletes itself in OnDone (gRPC's last reaction).
#ifndef PDSERVE_ROUTER_API_GRPC_GENERATE_STREAM_H_
#define PDSERVE_ROUTER_API_GRPC_GENERATE_STREAM_H_

#include "grpcpp/grpcpp.h"
#include "pdserve/v1/generation.pb.h"
#include "router/call/generate_call.h"
#include "router/call/generate_client.h"

namespace pdserve::router {

class GrpcGenerateStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                                 public GenerateClient {
 public:
  GrpcGenerateStream() = default;

  // Hands the stream its call (once, before the call starts).
  void Bind(GenerateCall::Ref call) { call_ = std::move(call); }

  // GenerateClient.
  bool Write(const v1::GenerateResponse& message) override;
  void Finish(const grpc::Status& status) override;

  // grpc::ServerWriteReactor.
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  grpc::ByteBuffer in_write_;  // the message gRPC is writing
  GenerateCall::Ref call_;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_API_GRPC_GENERATE_STREAM_H_
