#include "prefill_worker/prefill_service.h"

#include "common/rpc/load_watch_reactor.h"
#include "common/rpc/raw_message.h"
#include "common/worker/worker_info.h"
#include "prefill_worker/prefill_call.h"

namespace pdserve::prefill {

v1::WorkerInfo PrefillService::Info() const {
  return DescribeWorker(v1::WORKER_ROLE_PREFILL, ctx_->worker_id, *ctx_->model, ctx_->layout);
}

grpc::ServerUnaryReactor* PrefillService::GetInfo(grpc::CallbackServerContext* rpc,
                                                  const grpc::ByteBuffer* body,
                                                  grpc::ByteBuffer* response) {
  return AnswerRawUnary<v1::GetInfoRequest>(rpc, *body, response,
                                            [this](const v1::GetInfoRequest&) { return Info(); });
}

grpc::ServerUnaryReactor* PrefillService::GetLoad(grpc::CallbackServerContext* rpc,
                                                  const grpc::ByteBuffer* body,
                                                  grpc::ByteBuffer* response) {
  PrefillContext* ctx = ctx_;
  return AnswerRawUnary<v1::GetLoadRequest>(
      rpc, *body, response, [ctx](const v1::GetLoadRequest&) { return PrefillLoadReport(*ctx); });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* PrefillService::WatchLoad(
    grpc::CallbackServerContext* rpc, const grpc::ByteBuffer* body) {
  PrefillContext* ctx = ctx_;
  return LoadWatchReactor::Serve(rpc, *body, [ctx] { return PrefillLoadReport(*ctx); });
}

grpc::ServerUnaryReactor* PrefillService::Prefill(grpc::CallbackServerContext* rpc,
                                                  const grpc::ByteBuffer* body,
                                                  grpc::ByteBuffer* response) {
  v1::PrefillRequest request;
  if (absl::Status s = ParseRawRequest(*body, rpc->peer(), &request); !s.ok()) {
    return FinishedUnary(rpc, s);
  }
  return new PrefillCall(ctx_, rpc, request, response);
}

}  // namespace pdserve::prefill
