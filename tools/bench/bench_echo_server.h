// EchoGenerationServer: an in-process Generation server with no model. A
// Generate call is answered at once: Started, then max_tokens one-token
// chunks written back to back (the prompt's ids, cycled), then Finished.
// `pdserve bench --calibrate` runs the benchmark client against it to
// measure what the client and gRPC themselves add to TTFT and ITL; tests
// use it as a fast stand-in for a router.
//
// Thread-safety: the server runs its calls on gRPC's callback threads; the
// object itself is only started and destroyed.
#ifndef PDSERVE_TOOLS_BENCH_BENCH_ECHO_SERVER_H_
#define PDSERVE_TOOLS_BENCH_BENCH_ECHO_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "pdserve/v1/generation.grpc.pb.h"

namespace pdserve {

class EchoGenerationServer {
 public:
  // What GetModelInfo reports: wide enough for any synthetic workload.
  static constexpr int kVocabSize = 49152;
  static constexpr int kContextLength = 1 << 20;

  // Listens on 127.0.0.1 on a free port.
  static absl::StatusOr<std::unique_ptr<EchoGenerationServer>> Start();
  ~EchoGenerationServer();

  std::string address() const;

 private:
  EchoGenerationServer() = default;

  std::unique_ptr<v1::Generation::CallbackService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_BENCH_ECHO_SERVER_H_
