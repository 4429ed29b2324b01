#include "decode_worker/decode_service.h"

#include "common/grpc_status.h"
#include "common/proto_convert.h"
#include "common/rpc/load_watch_reactor.h"
#include "decode_worker/decode_call.h"

namespace pdserve {

grpc::ServerUnaryReactor* DecodeService::GetInfo(grpc::CallbackServerContext* rpc,
                                                 const v1::GetInfoRequest*,
                                                 v1::WorkerInfo* resp) {
  resp->set_worker_id(ctx_->worker_id);
  resp->set_role(v1::WORKER_ROLE_DECODE);
  resp->set_model_fingerprint(ctx_->model->fingerprint());
  *resp->mutable_kv_layout() = ToProto(ctx_->layout);
  resp->set_protocol_version(kProtocolVersion);
  resp->set_kv_endpoint(ctx_->kv_endpoint);
  resp->set_context_length(ctx_->model->config().context_length);
  resp->set_model_name(ctx_->model->config().name);
  grpc::ServerUnaryReactor* r = rpc->DefaultReactor();
  r->Finish(grpc::Status::OK);
  return r;
}

v1::LoadReport DecodeService::Load() const {
  v1::LoadReport r = ToLoadReport(ctx_->loop->load(), ctx_->draining.load());
  r.set_pending_transfers(static_cast<uint32_t>(ctx_->receiver->num_pending()));
  return r;
}

grpc::ServerUnaryReactor* DecodeService::GetLoad(grpc::CallbackServerContext* rpc,
                                                 const v1::GetLoadRequest*,
                                                 v1::LoadReport* resp) {
  *resp = Load();
  grpc::ServerUnaryReactor* r = rpc->DefaultReactor();
  r->Finish(grpc::Status::OK);
  return r;
}

grpc::ServerWriteReactor<v1::LoadReport>* DecodeService::WatchLoad(
    grpc::CallbackServerContext*, const v1::WatchLoadRequest* req) {
  const absl::Duration interval =
      absl::Milliseconds(req->interval_ms() > 0 ? std::max(req->interval_ms(), 10u) : 200u);
  return new LoadWatchReactor([this] { return Load(); }, interval);
}

grpc::ServerWriteReactor<v1::DecodeEvent>* DecodeService::Decode(grpc::CallbackServerContext* rpc,
                                                                 const v1::DecodeRequest* req) {
  return new DecodeCall(ctx_, rpc, *req);
}

grpc::ServerUnaryReactor* DecodeService::RetryTransfer(grpc::CallbackServerContext* rpc,
                                                       const v1::RetryTransferRequest* req,
                                                       v1::RetryTransferResponse* resp) {
  grpc::ServerUnaryReactor* r = rpc->DefaultReactor();
  RetryDecodeTransfer(ctx_, *req, [r, resp](absl::StatusOr<uint64_t> epoch) {
    if (epoch.ok()) resp->set_epoch(*epoch);
    r->Finish(epoch.ok() ? grpc::Status::OK : ToGrpcStatus(epoch.status()));
  });
  return r;
}

}  // namespace pdserve
