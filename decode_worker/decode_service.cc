#include "decode_worker/decode_service.h"

#include "common/rpc/grpc_status.h"
#include "common/rpc/load_watch_reactor.h"
#include "common/rpc/raw_message.h"
#include "common/rpc/rejected_stream.h"
#include "common/worker/worker_info.h"
#include "common/worker/worker_proto.h"
#include "decode_worker/decode_call.h"
#include "decode_worker/stream_migration.h"

namespace pdserve::decode {

v1::WorkerInfo DecodeService::Info() const {
  v1::WorkerInfo info =
      DescribeWorker(v1::WORKER_ROLE_DECODE, ctx_->worker_id, *ctx_->model, ctx_->layout);
  info.set_kv_endpoint(ctx_->kv_endpoint);
  return info;
}

v1::LoadReport DecodeService::Load() const {
  v1::LoadReport r = ToLoadReport(ctx_->loop->load(), ctx_->draining.load());
  r.set_pending_transfers(static_cast<uint32_t>(ctx_->receiver->num_pending()));
  return r;
}

grpc::ServerUnaryReactor* DecodeService::GetInfo(grpc::CallbackServerContext* rpc,
                                                 const grpc::ByteBuffer* body,
                                                 grpc::ByteBuffer* response) {
  return AnswerRawUnary<v1::GetInfoRequest>(rpc, *body, response,
                                            [this](const v1::GetInfoRequest&) { return Info(); });
}

grpc::ServerUnaryReactor* DecodeService::GetLoad(grpc::CallbackServerContext* rpc,
                                                 const grpc::ByteBuffer* body,
                                                 grpc::ByteBuffer* response) {
  return AnswerRawUnary<v1::GetLoadRequest>(rpc, *body, response,
                                            [this](const v1::GetLoadRequest&) { return Load(); });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* DecodeService::WatchLoad(
    grpc::CallbackServerContext* rpc, const grpc::ByteBuffer* body) {
  return LoadWatchReactor::Serve(rpc, *body, [this] { return Load(); });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* DecodeService::Decode(grpc::CallbackServerContext* rpc,
                                                                  const grpc::ByteBuffer* body) {
  v1::DecodeRequest request;
  if (absl::Status s = ParseRawRequest(*body, rpc->peer(), &request); !s.ok()) {
    return new RejectedStream(ToGrpcStatus(s));
  }
  return new DecodeCall(ctx_, rpc, request);
}

grpc::ServerUnaryReactor* DecodeService::RetryTransfer(grpc::CallbackServerContext* rpc,
                                                       const grpc::ByteBuffer* body,
                                                       grpc::ByteBuffer* response) {
  v1::RetryTransferRequest request;
  if (absl::Status s = ParseRawRequest(*body, rpc->peer(), &request); !s.ok()) {
    return FinishedUnary(rpc, s);
  }
  grpc::ServerUnaryReactor* r = rpc->DefaultReactor();
  RetryDecodeTransfer(ctx_, request, [r, response](absl::StatusOr<uint64_t> epoch) {
    if (epoch.ok()) {
      v1::RetryTransferResponse answer;
      answer.set_epoch(*epoch);
      *response = SerializeRawMessage(answer);
    }
    r->Finish(epoch.ok() ? grpc::Status::OK : ToGrpcStatus(epoch.status()));
  });
  return r;
}

grpc::ServerUnaryReactor* DecodeService::Handoff(grpc::CallbackServerContext* rpc,
                                                 const grpc::ByteBuffer* body,
                                                 grpc::ByteBuffer* response) {
  v1::HandoffRequest request;
  if (absl::Status s = ParseRawRequest(*body, rpc->peer(), &request); !s.ok()) {
    return FinishedUnary(rpc, s);
  }
  grpc::ServerUnaryReactor* r = rpc->DefaultReactor();
  HandoffStream(ctx_, request, [r, response](absl::StatusOr<v1::HandoffResponse> answer) {
    if (answer.ok()) *response = SerializeRawMessage(*answer);
    r->Finish(answer.ok() ? grpc::Status::OK : ToGrpcStatus(answer.status()));
  });
  return r;
}

grpc::ServerUnaryReactor* DecodeService::OfferMigration(grpc::CallbackServerContext* rpc,
                                                        const grpc::ByteBuffer* body,
                                                        grpc::ByteBuffer* response) {
  v1::OfferMigrationRequest request;
  if (absl::Status s = ParseRawRequest(*body, rpc->peer(), &request); !s.ok()) {
    return FinishedUnary(rpc, s);
  }
  grpc::ServerUnaryReactor* r = rpc->DefaultReactor();
  OfferRequestedStream(ctx_, request, [r, response](absl::Status s) {
    if (s.ok()) *response = SerializeRawMessage(v1::OfferMigrationResponse());
    r->Finish(ToGrpcStatus(s));
  });
  return r;
}

}  // namespace pdserve::decode
