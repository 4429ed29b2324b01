// The security surface end to end, with the real binaries: the router
// serves TLS and requires bearer tokens; router and decode worker talk
// mutual TLS; one client may hold only one stream. Certificates are made
// by the openssl CLI at test time (skipped without it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "tests/testing/cluster_test_util.h"
#include "tests/testing/file_contents.h"
#include "tests/testing/http_test_client.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_certificates.h"
#include "tools/cli/generate_client.h"

namespace pdserve::testing {
namespace {

// The test certificates (test_certificates.h) and a token file.
bool MakeCertificates(const std::string& dir) {
  if (!MakeTestCertificates(dir)) return false;
  std::ofstream(dir + "/tokens") << "good-token\n";
  return true;
}

std::shared_ptr<grpc::ChannelCredentials> Tls(const std::string& dir, bool client_cert) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = testing::FileContents(dir + "/ca.pem");
  if (client_cert) {
    o.pem_private_key = testing::FileContents(dir + "/client.key");
    o.pem_cert_chain = testing::FileContents(dir + "/client.pem");
  }
  return grpc::SslCredentials(o);
}

ClientSecurity Client(const std::string& dir, const std::string& token) {
  ClientSecurity s;
  s.credentials = Tls(dir, /*client_cert=*/false);
  s.bearer_token = token;
  return s;
}

v1::GenerateRequest Chat(const std::string& text, int max_tokens) {
  v1::GenerateRequest r = ChatRequest(text, max_tokens);
  r.set_ignore_eos(true);
  return r;
}

TEST(TlsAuthTest, OnlyAuthenticatedTlsClientsAreServed) {
  // Declared before the cluster, which reads the certificates until it
  // stops, and so removed after it.
  const ScopedTempDir certs("tls");
  const ScopedTempDir logs("tls-logs");
  const std::string& dir = certs.path();
  if (std::system("command -v openssl >/dev/null") != 0 || !MakeCertificates(dir)) {
    GTEST_SKIP() << "openssl CLI not available to make test certificates";
  }
  LocalClusterOptions o;
  o.bin_dir = BinDir();
  o.model = RealModelPath();
  o.log_dir = logs.path();
  o.decode = 1;
  o.colocated = true;
  o.extra_decode_flags = {"--tls_cert=" + dir + "/server.pem", "--tls_key=" + dir + "/server.key",
                          "--tls_client_ca=" + dir + "/ca.pem"};
  o.extra_router_flags = {"--tls_cert=" + dir + "/server.pem", "--tls_key=" + dir + "/server.key",
                          "--worker_tls_ca=" + dir + "/ca.pem",
                          "--worker_tls_cert=" + dir + "/client.pem",
                          "--worker_tls_key=" + dir + "/client.key",
                          "--auth_token_file=" + dir + "/tokens", "--max_streams_per_client=1"};
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string router = (*cluster)->router_address();

  GenerateClient good(router, Client(dir, "good-token"));
  // Ready once the router, over mutual TLS, sees its decode worker.
  absl::Status ready = absl::UnavailableError("not tried");
  for (int i = 0; i < 300 && !ready.ok(); ++i) {
    ready = good.Generate(Chat("Hi", 1), absl::Seconds(10), nullptr).status();
    if (!ready.ok()) absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_TRUE(ready.ok()) << ready << " (logs in " << o.log_dir << ")";

  // A plaintext client cannot even connect.
  auto plain = GenerateClient(router).Generate(Chat("Hi", 2), absl::Seconds(10), nullptr);
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kUnavailable) << plain.status();
  // TLS without a token, or with a wrong one: UNAUTHENTICATED.
  auto anonymous =
      GenerateClient(router, Client(dir, "")).Generate(Chat("Hi", 2), absl::Seconds(10), nullptr);
  EXPECT_EQ(anonymous.status().code(), absl::StatusCode::kUnauthenticated) << anonymous.status();
  auto wrong = GenerateClient(router, Client(dir, "bad-token"))
                   .Generate(Chat("Hi", 2), absl::Seconds(10), nullptr);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated) << wrong.status();

  // The decode worker refuses a client without a certificate its CA signed.
  const std::string decode = (*cluster)->addresses("decode")[0];
  for (bool with_cert : {false, true}) {
    auto stub = v1::DecodeWorker::NewStub(grpc::CreateChannel(decode, Tls(dir, with_cert)));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::WorkerInfo info;
    const grpc::Status s = stub->GetInfo(&ctx, v1::GetInfoRequest(), &info);
    EXPECT_EQ(s.ok(), with_cert) << s.error_message();
  }

  // One stream per client: a second one while the first streams is refused.
  absl::Notification first_chunk;
  absl::StatusOr<GenerateResult> long_run;
  std::thread holder([&] {
    GenerateClient c(router, Client(dir, "good-token"));
    long_run = c.Generate(Chat("Tell me a long story.", 96), absl::Seconds(120),
                          [&](const std::string&) {
                            if (!first_chunk.HasBeenNotified()) first_chunk.Notify();
                          });
  });
  ASSERT_TRUE(first_chunk.WaitForNotificationWithTimeout(absl::Seconds(60)));
  auto second = good.Generate(Chat("Hi", 2), absl::Seconds(10), nullptr);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted) << second.status();
  holder.join();
  ASSERT_TRUE(long_run.ok()) << long_run.status();
  EXPECT_EQ(long_run->finished.usage().completion_tokens(), 96);
  // The slot comes back with the stream. The router releases it when its
  // call object is destroyed, a moment after the client saw the status, so
  // the next stream may race it: allow a bounded wait.
  absl::Status again = absl::UnknownError("not tried");
  for (int i = 0; i < 50 && !again.ok(); ++i) {
    again = good.Generate(Chat("Hi", 2), absl::Seconds(30), nullptr).status();
    if (!again.ok()) {
      ASSERT_EQ(again.code(), absl::StatusCode::kResourceExhausted) << again;
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  EXPECT_TRUE(again.ok()) << again;

  // The HTTP API: the same certificate, tokens and per-client limit.
  const std::string http = (*cluster)->http_address();
  const std::vector<std::pair<std::string, std::string>> token = {
      {"Authorization", "Bearer good-token"}};
  const std::string chat = R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})";
  HttpResult https = HttpsCall(http, dir + "/ca.pem", "POST", "/v1/chat/completions", chat, token);
  EXPECT_EQ(https.status, 200) << https.body;
  EXPECT_EQ(HttpsCall(http, dir + "/ca.pem", "GET", "/v1/models", "", token).status, 200);
  EXPECT_EQ(HttpsCall(http, dir + "/ca.pem", "POST", "/v1/chat/completions", chat).status, 401);
  EXPECT_EQ(HttpsCall(http, dir + "/ca.pem", "POST", "/v1/chat/completions", chat,
                      {{"Authorization", "Bearer bad-token"}})
                .status,
            401);
  // Plain HTTP on the TLS port gets no HTTP answer.
  EXPECT_EQ(HttpCall(http, "GET", "/health").status, 0);
  // gRPC and HTTP streams of one client count against one limit.
  absl::Notification http_first_chunk;
  std::thread http_holder([&] {
    GenerateClient c(router, Client(dir, "good-token"));
    (void)c.Generate(Chat("Tell me a long story.", 64), absl::Seconds(120),
                     [&](const std::string&) {
                       if (!http_first_chunk.HasBeenNotified()) http_first_chunk.Notify();
                     });
  });
  ASSERT_TRUE(http_first_chunk.WaitForNotificationWithTimeout(absl::Seconds(60)));
  HttpResult limited =
      HttpsCall(http, dir + "/ca.pem", "POST", "/v1/chat/completions", chat, token);
  EXPECT_EQ(limited.status, 429) << limited.body;
  EXPECT_EQ(limited.Header("Retry-After"), "1");
  http_holder.join();
  (*cluster)->Stop();
}

}  // namespace
}  // namespace pdserve::testing
