// PrefillCall: one PrefillWorker.Prefill (worker.proto).
//
// The prompt joins the engine's batch as a sequence with max_tokens 1 whose
// KV blocks are held after it finishes; the KvExporter streams each layer to
// the decode worker as it is computed, and once the first token is sampled
// commits the transfer off the engine thread. The call answers with the
// first token and the phase timings after the decode worker acknowledged
// (a serialized PrefillResponse: the method is raw), or with the transfer's
// error. Client cancellation aborts the transfer and frees the blocks.
//
// Lifetime: gRPC owns the reactor (deleted in OnDone); engine and commit
// threads reach the call only through the shared State, whose Finish() is
// idempotent and stops touching the reactor once it ran.
#ifndef PDSERVE_PREFILL_WORKER_PREFILL_CALL_H_
#define PDSERVE_PREFILL_WORKER_PREFILL_CALL_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include <memory>

#include "pdserve/v1/worker.pb.h"
#include "prefill_worker/prefill_context.h"

namespace pdserve::prefill {

class PrefillCall : public grpc::ServerUnaryReactor {
 public:
  PrefillCall(PrefillContext* ctx, grpc::CallbackServerContext* rpc, const v1::PrefillRequest& req,
              grpc::ByteBuffer* resp);

  void OnCancel() override;
  void OnDone() override;

  struct State;

 private:
  PrefillContext* const ctx_;
  std::shared_ptr<State> state_;
};

}  // namespace pdserve::prefill

#endif  // PDSERVE_PREFILL_WORKER_PREFILL_CALL_H_
