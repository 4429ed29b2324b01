// DecodeCall: one DecodeWorker.Decode stream (worker.proto).
//
// Remote prefill: reserve blocks on the engine thread, register them with
// the KV receiver under (transfer_id, epoch 1) and send Reserved; when the
// commit arrives, the prefill worker's first token is emitted and the
// sequence joins the continuous batch. A failed epoch (the prefill worker
// aborted, died mid-payload or sent a bad frame) keeps the blocks and re-arms
// them under the next epoch within the same wait; RetryDecodeTransfer (the
// router retrying on another prefill worker) re-arms with a fresh wait.
// Local prefill: the engine prefills and decodes. A request moved here by a
// decode failover numbers its tokens from first_index; one moved here by a
// migration reserves like a remote prefill and gets its KV from the decode
// worker it leaves. A stream that accepts migration may itself be offered
// (stream_migration.h) when this worker drains or the router asks. Tokens stream as
// they are sampled; the stream ends with
// DecodeFinished, or an error status (the KV never came: DEADLINE_EXCEEDED;
// a bad transfer: the receiver's status; no memory: RESOURCE_EXHAUSTED).
//
// Every path that ends a request releases its blocks exactly once: the
// engine frees them when the sequence finishes or is cancelled; a sequence
// cancelled while its KV is still coming gives its blocks up only once the
// receiver's on_done for the epoch has run, so no late frame (a device
// channel finishing its receive) can land in a freed block, and the engine
// thread never waits for the receiver to stop one.
//
// Threads: gRPC reactions, the engine thread and the receiver's I/O thread
// all touch the call; they share `State` through shared_ptr, the engine-side
// fields are only used on the engine thread, and the reactor is reached
// only through the StreamOutbox.
#ifndef PDSERVE_DECODE_WORKER_DECODE_CALL_H_
#define PDSERVE_DECODE_WORKER_DECODE_CALL_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "decode_worker/decode_context.h"
#include "pdserve/v1/worker.pb.h"

namespace pdserve::decode {

// Writes serialized DecodeEvents (the service's methods are raw).
class DecodeCall : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  DecodeCall(DecodeContext* ctx, grpc::CallbackServerContext* rpc, const v1::DecodeRequest& req);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  using State = DecodeCallState;

 private:
  DecodeContext* const ctx_;
  std::shared_ptr<State> state_;
};

// DecodeWorker.RetryTransfer: moves the reservation of the stream with
// `req.transfer_id` that still waits for KV to the next epoch, with a fresh
// KV wait, and reports that epoch through `done` (on the engine thread).
// NOT_FOUND when no such stream waits for KV.
void RetryDecodeTransfer(DecodeContext* ctx, const v1::RetryTransferRequest& req,
                         std::function<void(absl::StatusOr<uint64_t>)> done);

}  // namespace pdserve::decode

#endif  // PDSERVE_DECODE_WORKER_DECODE_CALL_H_
