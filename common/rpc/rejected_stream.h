// RejectedStream: the reactor for a server-streaming call refused before any
// work (a body that does not parse, admission control): it ends the stream
// with `status` at once and deletes itself when gRPC is done with it.
#ifndef PDSERVE_COMMON_RPC_REJECTED_STREAM_H_
#define PDSERVE_COMMON_RPC_REJECTED_STREAM_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include <utility>

namespace pdserve {

class RejectedStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit RejectedStream(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RPC_REJECTED_STREAM_H_
