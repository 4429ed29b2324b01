// GrpcServer refuses a port that another server already listens on (gRPC
// would otherwise share it through SO_REUSEPORT), and the first server
// keeps taking connections.
#include "common/rpc/grpc_server.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

TEST(GrpcServerTest, ATakenPortFailsTheStart) {
  GrpcServerOptions first;
  first.listen_address = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<GrpcServer>> a = GrpcServer::Start(first);
  ASSERT_TRUE(a.ok()) << a.status();
  GrpcServerOptions second;
  second.listen_address = absl::StrCat("127.0.0.1:", (*a)->port());
  absl::StatusOr<std::unique_ptr<GrpcServer>> b = GrpcServer::Start(second);
  EXPECT_FALSE(b.ok()) << "a second server started on port " << (*a)->port();
  if (b.ok()) return;
  EXPECT_TRUE(absl::IsUnavailable(b.status())) << b.status();

  // The first one still takes connections.
  auto channel = grpc::CreateChannel(second.listen_address, grpc::InsecureChannelCredentials());
  EXPECT_TRUE(
      channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(30)));
}

}  // namespace
}  // namespace pdserve
