// LoadWatchReactor: serves a worker's WatchLoad stream — one LoadReport now
// and then one every interval until the client goes away. The router uses
// the stream both for load-aware routing and as the liveness signal.
//
// Lifetime: gRPC owns the reactor; it deletes itself in OnDone(), which
// gRPC calls only after Finish() and after the last write completed. The
// alarm callback and OnWriteDone/OnCancel serialise on mu_.
#ifndef PDSERVE_COMMON_RPC_LOAD_WATCH_REACTOR_H_
#define PDSERVE_COMMON_RPC_LOAD_WATCH_REACTOR_H_

#include <grpcpp/alarm.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include <functional>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pdserve/v1/worker.pb.h"

namespace pdserve {

class LoadWatchReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  using LoadFn = std::function<v1::LoadReport()>;
  LoadWatchReactor(LoadFn load, absl::Duration interval);

  // A raw WatchLoad method: parses `body` as a WatchLoadRequest and streams
  // `load()` at its interval (default 200 ms, at least 10 ms), or refuses a
  // body that does not parse with INVALID_ARGUMENT.
  static grpc::ServerWriteReactor<grpc::ByteBuffer>* Serve(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer& body,
                                                           LoadFn load);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void WriteNow() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeFinish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnAlarm(bool fired);

  const LoadFn load_;
  const absl::Duration interval_;
  absl::Mutex mu_;
  grpc::ByteBuffer report_ ABSL_GUARDED_BY(mu_);  // the write in flight
  grpc::Alarm alarm_;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool alarm_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RPC_LOAD_WATCH_REACTOR_H_
