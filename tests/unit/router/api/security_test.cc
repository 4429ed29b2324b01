// Bearer tokens, per-client stream limits and TLS configuration checks of
// the router (the end-to-end TLS/mTLS/auth path is in
// tests/integration/tls_auth_test.cc).
#include <gtest/gtest.h>

#include <fstream>

#include "common/rpc/tls_credentials.h"
#include "router/api/bearer_auth.h"
#include "router/api/client_limiter.h"
#include "tests/testing/temp_dir.h"

namespace pdserve::router {
namespace {

std::string WriteFile(const std::string& name, const std::string& contents) {
  // The temp directory is shared with other runs on the machine.
  const std::string path = pdserve::testing::TestTempDir("security-test") + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

TEST(BearerAuthTest, AcceptsListedTokensAndNamesThemByLine) {
  absl::StatusOr<BearerAuth> auth =
      BearerAuth::Load(WriteFile("tokens", "# rotation\nold-secret\n\n  new-secret  \n"));
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ(*auth->CheckHeader("Bearer old-secret"), "token-1");
  EXPECT_EQ(*auth->CheckHeader("bearer new-secret"), "token-2");
}

TEST(BearerAuthTest, RejectsEverythingElse) {
  const BearerAuth auth({"s3cret"});
  for (const char* h : {"", "Bearer", "Bearer ", "Basic s3cret", "Bearer s3cre", "Bearer s3cret2",
                        "Bearer S3CRET", "s3cret"}) {
    EXPECT_EQ(auth.CheckHeader(h).status().code(), absl::StatusCode::kUnauthenticated) << h;
  }
}

TEST(BearerAuthTest, EmptyOrMissingFileIsAConfigError) {
  EXPECT_EQ(BearerAuth::Load(WriteFile("empty", "# nothing\n\n")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BearerAuth::Load("/nonexistent/tokens").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The token file changes under a running router (a Secret update): the new
// set applies on the next check once the interval passed, copies of the
// object share it, and a file that turns unreadable or empty keeps the last
// good set.
TEST(BearerAuthTest, ReloadsTheFileAndKeepsTheLastGoodSet) {
  const std::string path = WriteFile("rotating", "first\n");
  absl::StatusOr<BearerAuth> loaded = BearerAuth::Load(path, absl::ZeroDuration());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const BearerAuth copy = *loaded;  // as GenerationService holds it
  EXPECT_TRUE(copy.CheckHeader("Bearer first").ok());
  EXPECT_FALSE(copy.CheckHeader("Bearer second").ok());

  std::ofstream(path) << "second\nfirst\n";
  EXPECT_EQ(*copy.CheckHeader("Bearer second"), "token-1");
  EXPECT_EQ(*loaded->CheckHeader("Bearer first"), "token-2");

  std::ofstream(path) << "# all revoked by mistake\n";
  EXPECT_TRUE(copy.CheckHeader("Bearer second").ok()) << "an empty file keeps the last set";
  std::ofstream(path) << "third\n";
  EXPECT_TRUE(copy.CheckHeader("Bearer third").ok());
  EXPECT_FALSE(copy.CheckHeader("Bearer second").ok()) << "removed tokens stop working";
}

TEST(BearerAuthTest, FixedSetsAreNeverReread) {
  const std::string path = WriteFile("fixed", "one\n");
  absl::StatusOr<BearerAuth> slow = BearerAuth::Load(path, absl::Hours(1));
  ASSERT_TRUE(slow.ok());
  std::ofstream(path) << "two\n";
  EXPECT_TRUE(slow->CheckHeader("Bearer one").ok()) << "within the interval the file is not read";
  EXPECT_FALSE(slow->CheckHeader("Bearer two").ok());
}

TEST(ClientLimiterTest, CapsEachClientSeparately) {
  ClientLimiter limiter(2);
  EXPECT_TRUE(limiter.TryAcquire("a"));
  EXPECT_TRUE(limiter.TryAcquire("a"));
  EXPECT_FALSE(limiter.TryAcquire("a"));
  EXPECT_TRUE(limiter.TryAcquire("b"));
  limiter.Release("a");
  EXPECT_EQ(limiter.open("a"), 1);
  EXPECT_TRUE(limiter.TryAcquire("a"));
  limiter.Release("a");
  limiter.Release("a");
  limiter.Release("b");
  EXPECT_EQ(limiter.open("a"), 0);
  EXPECT_EQ(limiter.open("b"), 0);
}

TEST(ClientLimiterTest, ZeroMeansNoCap) {
  ClientLimiter limiter(0);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(limiter.TryAcquire("a"));
  EXPECT_EQ(limiter.open("a"), 1000);
}

TEST(ClientLimiterTest, PeerHostDropsThePort) {
  EXPECT_EQ(PeerHost("ipv4:10.1.2.3:51234"), "10.1.2.3");
  EXPECT_EQ(PeerHost("ipv6:[::1]:4000"), "[::1]");
  EXPECT_EQ(PeerHost("unix:/tmp/sock"), "unix:/tmp/sock");
}

TEST(TlsCredentialsTest, IncompleteSetsAreRefused) {
  const std::string pem = WriteFile("x.pem", "-----BEGIN CERTIFICATE-----\nAA==\n");
  EXPECT_EQ(MakeServerCredentials({.cert = pem}).status().code(),
            absl::StatusCode::kInvalidArgument);  // no key
  EXPECT_EQ(MakeServerCredentials({.ca = pem}).status().code(),
            absl::StatusCode::kInvalidArgument);  // client CA but no own cert
  EXPECT_EQ(MakeChannelCredentials({.cert = pem, .key = pem}).status().code(),
            absl::StatusCode::kInvalidArgument);  // no CA to verify the server
  EXPECT_EQ(MakeServerCredentials({.cert = "/nonexistent", .key = pem}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeChannelCredentials({.ca = WriteFile("not.pem", "hello")}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MakeServerCredentials({}).ok());  // plaintext
  EXPECT_EQ(DescribeServerTls({}), "insecure");
  EXPECT_EQ(DescribeServerTls({.cert = pem, .key = pem}), "TLS");
  EXPECT_EQ(DescribeServerTls({.cert = pem, .key = pem, .ca = pem}), "mutual TLS");
}

}  // namespace
}  // namespace pdserve::router
