#include "prefill_worker/prefill_service.h"

#include "common/proto_convert.h"
#include "common/rpc/load_watch_reactor.h"
#include "common/rpc/protocol_version.h"
#include "prefill_worker/prefill_call.h"

namespace pdserve {

grpc::ServerUnaryReactor* PrefillService::GetInfo(grpc::CallbackServerContext* rpc,
                                                  const v1::GetInfoRequest*,
                                                  v1::WorkerInfo* resp) {
  resp->set_worker_id(ctx_->worker_id);
  resp->set_role(v1::WORKER_ROLE_PREFILL);
  resp->set_model_fingerprint(ctx_->model->fingerprint());
  *resp->mutable_kv_layout() = ToProto(ctx_->layout);
  resp->set_protocol_version(kProtocolVersion);
  resp->set_context_length(ctx_->model->config().context_length);
  resp->set_model_name(ctx_->model->config().name);
  grpc::ServerUnaryReactor* r = rpc->DefaultReactor();
  r->Finish(grpc::Status::OK);
  return r;
}

grpc::ServerUnaryReactor* PrefillService::GetLoad(grpc::CallbackServerContext* rpc,
                                                  const v1::GetLoadRequest*,
                                                  v1::LoadReport* resp) {
  *resp = PrefillLoadReport(*ctx_);
  grpc::ServerUnaryReactor* r = rpc->DefaultReactor();
  r->Finish(grpc::Status::OK);
  return r;
}

grpc::ServerWriteReactor<v1::LoadReport>* PrefillService::WatchLoad(
    grpc::CallbackServerContext*, const v1::WatchLoadRequest* req) {
  const absl::Duration interval =
      absl::Milliseconds(req->interval_ms() > 0 ? std::max(req->interval_ms(), 10u) : 200u);
  PrefillContext* ctx = ctx_;
  return new LoadWatchReactor([ctx] { return PrefillLoadReport(*ctx); }, interval);
}

grpc::ServerUnaryReactor* PrefillService::Prefill(grpc::CallbackServerContext* rpc,
                                                  const v1::PrefillRequest* req,
                                                  v1::PrefillResponse* resp) {
  return new PrefillCall(ctx_, rpc, *req, resp);
}

}  // namespace pdserve
