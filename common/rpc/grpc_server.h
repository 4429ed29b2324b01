// GrpcServer: starts a gRPC server for a pdserve process with the standard
// extras every process exposes — grpc.health.v1 (SERVING / NOT_SERVING
// during drain) and server reflection — and listens on one address.
//
// Thread-safety: all methods may be called from any thread.
#ifndef PDSERVE_COMMON_RPC_GRPC_SERVER_H_
#define PDSERVE_COMMON_RPC_GRPC_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pdserve {

struct GrpcServerOptions {
  std::string listen_address = "0.0.0.0:0";  // port 0 picks a free port
  int max_receive_message_bytes = 16 << 20;
  std::vector<grpc::Service*> services;      // not owned; outlive the server
  // Null = insecure (see tls_credentials.h).
  std::shared_ptr<grpc::ServerCredentials> credentials;
};

class GrpcServer {
 public:
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const GrpcServerOptions& options);
  ~GrpcServer();

  int port() const { return port_; }
  // Health status of the whole server ("" service).
  void SetServing(bool serving);
  // Stops accepting calls, lets calls in flight finish until `grace`, then
  // cancels the rest.
  void Shutdown(absl::Duration grace);

 private:
  GrpcServer(std::unique_ptr<grpc::Server> server, int port)
      : server_(std::move(server)), port_(port) {}

  std::unique_ptr<grpc::Server> server_;
  int port_;
  bool shut_down_ = false;
};

// Blocks SIGINT/SIGTERM in the calling thread; call first thing in main(),
// before any thread starts, so that every thread inherits the mask and
// WaitForTerminationSignal() is the only place that receives them.
void BlockTerminationSignals();
// Waits for SIGINT or SIGTERM and returns its number.
int WaitForTerminationSignal();
// The same for at most `timeout`; 0 when none arrived.
int WaitForTerminationSignal(absl::Duration timeout);

// Waits until the gRPC library has shut down (every channel, server,
// completion queue and credentials object of the process is gone and
// gRPC's own threads are joined), at most `timeout`; false when it had not.
// A process's serving path calls it after destroying its last gRPC object
// and before main() returns. Why: the last reference is often dropped on a
// gRPC thread (a callback that held a channel), so gRPC shuts down there,
// concurrently with exit(). Its threads then end after OPENSSL_cleanup()
// (an atexit handler) has deleted OpenSSL's thread-exit hook, and the
// per-thread RNG state of each thread that ran a TLS handshake is lost: a
// LeakSanitizer report, now and then.
bool AwaitGrpcShutdown(absl::Duration timeout);

// AwaitGrpcShutdown with the bound every binary uses at exit (well inside
// the grace a supervisor gives a draining process after SIGTERM;
// LocalCluster: 10 s), logging a warning when it runs out.
void AwaitGrpcShutdownBeforeExit();

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RPC_GRPC_SERVER_H_
