// A gtest global environment for test binaries that make TLS connections in
// process: after the last test it waits for gRPC to shut down
// (AwaitGrpcShutdown, common/rpc/grpc_server.h), as the binaries do before
// exit. Without it gRPC's threads — a channel still reconnecting, a server
// finishing its shutdown — can outlive OpenSSL's atexit cleanup, and the
// per-thread OpenSSL state of each thread that ran a handshake shows up as
// a LeakSanitizer report, now and then. Include it in one file of the test.
#ifndef PDSERVE_TESTS_TESTING_GRPC_SHUTDOWN_ENVIRONMENT_H_
#define PDSERVE_TESTS_TESTING_GRPC_SHUTDOWN_ENVIRONMENT_H_

#include <cstdio>

#include "absl/time/time.h"
#include "common/rpc/grpc_server.h"
#include "gtest/gtest.h"

namespace pdserve::testing {

class GrpcShutdownEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    // A gRPC object some test kept alive: not this environment's verdict
    // (LeakSanitizer gives one if it matters).
    if (!AwaitGrpcShutdown(absl::Seconds(10))) {
      fprintf(stderr, "gRPC did not shut down within 10 s after the tests\n");
    }
  }
};

inline ::testing::Environment* const kGrpcShutdownEnvironment =
    ::testing::AddGlobalTestEnvironment(new GrpcShutdownEnvironment);

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_TESTING_GRPC_SHUTDOWN_ENVIRONMENT_H_
