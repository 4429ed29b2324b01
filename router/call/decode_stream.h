// DecodeStream: the router's side of one DecodeWorker.Decode call, as a
// gRPC callback client reactor that hands every event to an Observer.
//
// Flow control: the observer may ask to pause reading (its client is slower
// than the decode worker); Resume() continues. gRPC HTTP/2 flow control then
// pushes back on the worker instead of the router buffering without bound.
//
// Lifetime: owned by its Observer (GenerateCall), which must keep it alive
// until OnDecodeDone has been delivered; OnDecodeDone is the last thing
// the stream does, so the observer may destroy it from inside that call.
// A hold (AddHold) keeps gRPC from completing the RPC while reading is
// paused; it is dropped when reading ends or the stream is cancelled.
//
// Thread-safety: Start() once; Cancel() and Resume() from any thread, any
// number of times, before or after the RPC ends.
#ifndef PDSERVE_ROUTER_CALL_DECODE_STREAM_H_
#define PDSERVE_ROUTER_CALL_DECODE_STREAM_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "pdserve/v1/worker.grpc.pb.h"

namespace pdserve::router {

class DecodeStream : public grpc::ClientReadReactor<v1::DecodeEvent> {
 public:
  class Observer {
   public:
    virtual ~Observer() = default;
    // Returns false to pause reading until Resume().
    virtual bool OnDecodeEvent(DecodeStream* stream, const v1::DecodeEvent& event) = 0;
    virtual void OnDecodeDone(DecodeStream* stream, const grpc::Status& status) = 0;
  };

  DecodeStream(Observer* observer, std::string address, v1::DecodeRequest request,
               std::chrono::system_clock::time_point deadline);

  // Keeps `stub` (and so its channel) until the stream is destroyed: the
  // worker may leave the registry's pool while the stream runs.
  void Start(std::shared_ptr<v1::DecodeWorker::Stub> stub);
  void Cancel();
  void Resume();

  const std::string& address() const { return address_; }
  // The stub Start() was given (null before): a migration's Handoff goes
  // to the same worker over the same channel.
  const std::shared_ptr<v1::DecodeWorker::Stub>& stub() const { return stub_; }

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  void ReleaseHold();

  Observer* const observer_;
  const std::string address_;
  const v1::DecodeRequest request_;
  std::shared_ptr<v1::DecodeWorker::Stub> stub_;  // set once, in Start()
  grpc::ClientContext context_;
  v1::DecodeEvent event_;  // the read buffer; one read is outstanding at a time

  absl::Mutex mu_;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool resume_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_DECODE_STREAM_H_
