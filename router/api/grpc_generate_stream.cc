#include "router/api/grpc_generate_stream.h"

#include "common/rpc/raw_message.h"

namespace pdserve::router {

bool GrpcGenerateStream::Write(const v1::GenerateResponse& message) {
  in_write_ = SerializeRawMessage(message);
  StartWrite(&in_write_);
  return false;  // OnWriteDone tells the call
}

void GrpcGenerateStream::Finish(const grpc::Status& status) {
  grpc::ServerWriteReactor<grpc::ByteBuffer>::Finish(status);
}

void GrpcGenerateStream::OnWriteDone(bool ok) { call_->OnWriteDone(ok); }

void GrpcGenerateStream::OnCancel() { call_->OnClientCancel(); }

void GrpcGenerateStream::OnDone() {
  delete this;  // drops the call's Ref last
}

}  // namespace pdserve::router
