// PrefillService: the PrefillWorker gRPC service (worker.proto). The
// methods are registered raw and parse their own requests
// (common/rpc/raw_message.h): a body that does not parse gets
// INVALID_ARGUMENT and a log line, where gRPC's typed handlers would answer
// UNIMPLEMENTED and log nothing.
#ifndef PDSERVE_PREFILL_WORKER_PREFILL_SERVICE_H_
#define PDSERVE_PREFILL_WORKER_PREFILL_SERVICE_H_

#include "pdserve/v1/worker.grpc.pb.h"
#include "prefill_worker/prefill_context.h"

namespace pdserve::prefill {

using RawPrefillWorkerService = v1::PrefillWorker::WithRawCallbackMethod_GetInfo<
    v1::PrefillWorker::WithRawCallbackMethod_GetLoad<
        v1::PrefillWorker::WithRawCallbackMethod_WatchLoad<
            v1::PrefillWorker::WithRawCallbackMethod_Prefill<v1::PrefillWorker::Service>>>>;

class PrefillService final : public RawPrefillWorkerService {
 public:
  explicit PrefillService(PrefillContext* ctx) : ctx_(ctx) {}

  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* rpc, const grpc::ByteBuffer* body,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* rpc, const grpc::ByteBuffer* body,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchLoad(grpc::CallbackServerContext* rpc,
                                                        const grpc::ByteBuffer* body) override;
  grpc::ServerUnaryReactor* Prefill(grpc::CallbackServerContext* rpc, const grpc::ByteBuffer* body,
                                    grpc::ByteBuffer* response) override;

 private:
  v1::WorkerInfo Info() const;

  PrefillContext* const ctx_;
};

}  // namespace pdserve::prefill

#endif  // PDSERVE_PREFILL_WORKER_PREFILL_SERVICE_H_
