// DecodeService: the DecodeWorker gRPC service (worker.proto). Reactions
// only validate, post to the engine thread and return. The methods are
// registered raw and parse their own requests (common/rpc/raw_message.h):
// a body that does not parse gets INVALID_ARGUMENT and a log line, where
// gRPC's typed handlers would answer UNIMPLEMENTED and log nothing.
#ifndef PDSERVE_DECODE_WORKER_DECODE_SERVICE_H_
#define PDSERVE_DECODE_WORKER_DECODE_SERVICE_H_

#include "common/rpc/protocol_version.h"
#include "decode_worker/decode_context.h"
#include "pdserve/v1/worker.grpc.pb.h"

namespace pdserve::decode {

using RawDecodeWorkerService =
    v1::DecodeWorker::WithRawCallbackMethod_GetInfo<v1::DecodeWorker::WithRawCallbackMethod_GetLoad<
        v1::DecodeWorker::WithRawCallbackMethod_WatchLoad<
            v1::DecodeWorker::WithRawCallbackMethod_Decode<
                v1::DecodeWorker::WithRawCallbackMethod_RetryTransfer<
                    v1::DecodeWorker::WithRawCallbackMethod_Handoff<
                        v1::DecodeWorker::WithRawCallbackMethod_OfferMigration<
                            v1::DecodeWorker::Service>>>>>>>;

class DecodeService final : public RawDecodeWorkerService {
 public:
  explicit DecodeService(DecodeContext* ctx) : ctx_(ctx) {}

  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* rpc, const grpc::ByteBuffer* body,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* rpc, const grpc::ByteBuffer* body,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchLoad(grpc::CallbackServerContext* rpc,
                                                        const grpc::ByteBuffer* body) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Decode(grpc::CallbackServerContext* rpc,
                                                     const grpc::ByteBuffer* body) override;
  grpc::ServerUnaryReactor* RetryTransfer(grpc::CallbackServerContext* rpc,
                                          const grpc::ByteBuffer* body,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Handoff(grpc::CallbackServerContext* rpc, const grpc::ByteBuffer* body,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* OfferMigration(grpc::CallbackServerContext* rpc,
                                           const grpc::ByteBuffer* body,
                                           grpc::ByteBuffer* response) override;

 private:
  v1::WorkerInfo Info() const;
  v1::LoadReport Load() const;

  DecodeContext* const ctx_;
};

}  // namespace pdserve::decode

#endif  // PDSERVE_DECODE_WORKER_DECODE_SERVICE_H_
