// DecodeService: the DecodeWorker gRPC service (worker.proto). Reactions
// only validate, post to the engine thread and return.
#ifndef PDSERVE_DECODE_WORKER_DECODE_SERVICE_H_
#define PDSERVE_DECODE_WORKER_DECODE_SERVICE_H_

#include "common/rpc/protocol_version.h"
#include "decode_worker/decode_context.h"
#include "pdserve/v1/worker.grpc.pb.h"

namespace pdserve {

class DecodeService final : public v1::DecodeWorker::CallbackService {
 public:
  explicit DecodeService(DecodeContext* ctx) : ctx_(ctx) {}

  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* rpc,
                                    const v1::GetInfoRequest* req, v1::WorkerInfo* resp) override;
  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* rpc,
                                    const v1::GetLoadRequest* req, v1::LoadReport* resp) override;
  grpc::ServerWriteReactor<v1::LoadReport>* WatchLoad(grpc::CallbackServerContext* rpc,
                                                      const v1::WatchLoadRequest* req) override;
  grpc::ServerWriteReactor<v1::DecodeEvent>* Decode(grpc::CallbackServerContext* rpc,
                                                    const v1::DecodeRequest* req) override;
  grpc::ServerUnaryReactor* RetryTransfer(grpc::CallbackServerContext* rpc,
                                          const v1::RetryTransferRequest* req,
                                          v1::RetryTransferResponse* resp) override;

 private:
  v1::LoadReport Load() const;

  DecodeContext* const ctx_;
};

}  // namespace pdserve

#endif  // PDSERVE_DECODE_WORKER_DECODE_SERVICE_H_
