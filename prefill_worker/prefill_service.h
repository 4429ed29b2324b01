// PrefillService: the PrefillWorker gRPC service (worker.proto).
#ifndef PDSERVE_PREFILL_WORKER_PREFILL_SERVICE_H_
#define PDSERVE_PREFILL_WORKER_PREFILL_SERVICE_H_

#include "pdserve/v1/worker.grpc.pb.h"
#include "prefill_worker/prefill_context.h"

namespace pdserve {

class PrefillService final : public v1::PrefillWorker::CallbackService {
 public:
  explicit PrefillService(PrefillContext* ctx) : ctx_(ctx) {}

  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* rpc,
                                    const v1::GetInfoRequest* req, v1::WorkerInfo* resp) override;
  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* rpc,
                                    const v1::GetLoadRequest* req, v1::LoadReport* resp) override;
  grpc::ServerWriteReactor<v1::LoadReport>* WatchLoad(grpc::CallbackServerContext* rpc,
                                                      const v1::WatchLoadRequest* req) override;
  grpc::ServerUnaryReactor* Prefill(grpc::CallbackServerContext* rpc,
                                    const v1::PrefillRequest* req,
                                    v1::PrefillResponse* resp) override;

 private:
  PrefillContext* const ctx_;
};

}  // namespace pdserve

#endif  // PDSERVE_PREFILL_WORKER_PREFILL_SERVICE_H_
