// Certificates change under a running process, as cert-manager renews them
// in Kubernetes: the gRPC server presents, and the router's client
// credentials trust, the new files within --tls_reload_s, without a
// restart; the HTTPS context follows too; and the router checks a worker's
// certificate against the DNS name of its tier, not the pod IP it dials.
// Certificates are made by the openssl CLI (skipped without it); every name
// they carry is a DNS name, never 127.0.0.1, so that a connection only
// verifies when the right name is checked.
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/rpc/grpc_server.h"
#include "common/rpc/tls_credentials.h"
#include "common/tls/reloading_tls_context.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "router/pool/worker_registry.h"
#include "tests/testing/fake_workers.h"
#include "tests/testing/grpc_shutdown_environment.h"
#include "tests/testing/temp_dir.h"

namespace pdserve {
namespace {

constexpr char kTierName[] = "pdserve-decode.test";

bool Shell(const std::string& script) {
  return std::system(absl::StrCat("(set -e; ", script, ") >/dev/null 2>&1").c_str()) == 0;
}

// <dir>/<ca>.pem/.key: a CA; <dir>/<name>.pem/.key: a leaf it signed for
// the DNS name `dns`.
bool MakeCa(const std::string& dir, const std::string& ca) {
  return Shell(absl::StrCat("cd '", dir, "'; openssl req -x509 -newkey ec -pkeyopt ",
                          "ec_paramgen_curve:prime256v1 -nodes -keyout ", ca, ".key -out ", ca,
                          ".pem -days 2 -subj /CN=", ca));
}
bool MakeLeaf(const std::string& dir, const std::string& ca, const std::string& name,
              const std::string& dns) {
  return Shell(absl::StrCat(
      "cd '", dir, "'; openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ",
      "-keyout ", name, ".key -out ", name, ".csr -subj /CN=", name, "; printf ",
      "'subjectAltName=DNS:", dns, "' > ", name, ".ext; openssl x509 -req -in ", name,
      ".csr -CA ", ca, ".pem -CAkey ", ca, ".key -CAcreateserial -days 2 -extfile ", name,
      ".ext -out ", name, ".pem"));
}

// Replaces `to` with a copy of `from` by rename, as the kubelet swaps a
// Secret volume's files: a reader sees the old file or the new one.
bool Install(const std::string& from, const std::string& to) {
  return Shell(absl::StrCat("cp '", from, "' '", to, ".tmp'; mv '", to, ".tmp' '", to, "'"));
}

// Whether a new connection through `creds` to 127.0.0.1:port completes its
// TLS handshake, checking the server's certificate against `name` ("" = the
// address dialled). Its own subchannel pool: never a connection that an
// earlier check left open.
bool Connects(int port, std::shared_ptr<grpc::ChannelCredentials> creds, const std::string& name) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (!name.empty()) args.SetSslTargetNameOverride(name);
  auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), creds, args);
  return channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

bool Eventually(const std::function<bool()>& condition) {
  const absl::Time until = absl::Now() + absl::Seconds(30);
  while (absl::Now() < until) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return condition();
}

class TlsRotationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v openssl >/dev/null") != 0 || !MakeCa(dir_.path(), "ca1") ||
        !MakeCa(dir_.path(), "ca2") || !MakeLeaf(dir_.path(), "ca1", "old", kTierName) ||
        !MakeLeaf(dir_.path(), "ca2", "new", kTierName)) {
      GTEST_SKIP() << "openssl CLI not available to make test certificates";
    }
    // What the process is configured with: the old pair, later replaced.
    ASSERT_TRUE(Install(Path("old.pem"), Path("server.pem")));
    ASSERT_TRUE(Install(Path("old.key"), Path("server.key")));
  }

  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  TlsFiles ServerFiles() const {
    TlsFiles f;
    f.cert = Path("server.pem");
    f.key = Path("server.key");
    f.reload_interval = absl::Seconds(1);
    return f;
  }

  // A new connection from a client that trusts the CA file `ca`.
  bool ConnectsTrusting(int port, const std::string& ca, const std::string& name) const {
    TlsFiles client;
    client.ca = Path(ca);
    auto creds = MakeChannelCredentials(client);
    return creds.ok() && Connects(port, *creds, name);
  }

  testing::ScopedTempDir dir_{"tls-rotation"};
};

TEST_F(TlsRotationTest, GrpcServerPresentsARenewedCertificateWithoutRestart) {
  auto creds = MakeServerCredentials(ServerFiles());
  ASSERT_TRUE(creds.ok()) << creds.status();
  GrpcServerOptions so;
  so.listen_address = "127.0.0.1:0";
  so.credentials = *creds;
  auto server = GrpcServer::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();

  EXPECT_TRUE(ConnectsTrusting(port, "ca1.pem", kTierName));
  // The certificate names the tier, not the address: checked, so refused.
  EXPECT_FALSE(ConnectsTrusting(port, "ca1.pem", ""));
  EXPECT_FALSE(ConnectsTrusting(port, "ca2.pem", kTierName));

  ASSERT_TRUE(Install(Path("new.key"), Path("server.key")));
  ASSERT_TRUE(Install(Path("new.pem"), Path("server.pem")));
  EXPECT_TRUE(Eventually([&] { return ConnectsTrusting(port, "ca2.pem", kTierName); }));
  EXPECT_FALSE(ConnectsTrusting(port, "ca1.pem", kTierName));

  // A broken key (a half-done manual copy) fails handshakes while it is
  // there (gRPC 1.51's watcher does not check the pair), and the server
  // keeps running: a good pair put back is served again, no restart.
  ASSERT_TRUE(Shell(absl::StrCat("printf 'not a key' > '", Path("server.key"), "'")));
  EXPECT_TRUE(Eventually([&] { return !ConnectsTrusting(port, "ca2.pem", kTierName); }))
      << "the watcher took the broken key, so handshakes fail while it is there";
  ASSERT_TRUE(Install(Path("new.key"), Path("server.key")));
  EXPECT_TRUE(Eventually([&] { return ConnectsTrusting(port, "ca2.pem", kTierName); }));
}

TEST_F(TlsRotationTest, ClientCredentialsTrustARenewedCa) {
  // The router's side: a worker already presents a certificate from the
  // new CA, and the router's --worker_tls_ca file then gains that CA.
  ASSERT_TRUE(Install(Path("new.key"), Path("server.key")));
  ASSERT_TRUE(Install(Path("new.pem"), Path("server.pem")));
  auto server_creds = MakeServerCredentials(ServerFiles());
  ASSERT_TRUE(server_creds.ok());
  GrpcServerOptions so;
  so.listen_address = "127.0.0.1:0";
  so.credentials = *server_creds;
  auto server = GrpcServer::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();

  ASSERT_TRUE(Install(Path("ca1.pem"), Path("trust.pem")));
  TlsFiles client;
  client.ca = Path("trust.pem");
  client.reload_interval = absl::Seconds(1);
  auto creds = MakeChannelCredentials(client);
  ASSERT_TRUE(creds.ok()) << creds.status();
  auto check = [&] { return Connects((*server)->port(), *creds, kTierName); };
  EXPECT_FALSE(check()) << "the old CA alone must not verify the new certificate";

  ASSERT_TRUE(Shell(absl::StrCat("cat '", Path("ca1.pem"), "' '", Path("ca2.pem"), "' > '",
                                 Path("bundle.pem"), "'")));
  ASSERT_TRUE(Install(Path("bundle.pem"), Path("trust.pem")));
  // The same credentials object, never rebuilt, now trusts the new CA.
  EXPECT_TRUE(Eventually(check));
}

// A dns:/// worker target resolves to pod IPs; the tier's certificate names
// the Service. The registry's channels check that name, so the worker joins
// the pool; dialled as a plain IP the same worker never does.
TEST_F(TlsRotationTest, RouterChecksTheTierNameOfDnsTargets) {
  auto server_creds = MakeServerCredentials(ServerFiles());
  ASSERT_TRUE(server_creds.ok());
  test::FakeKvBus bus;
  test::FakeDecodeWorker::Options wo;
  wo.credentials = *server_creds;
  test::FakeDecodeWorker worker(wo, &bus);
  TlsFiles client;
  client.ca = Path("ca1.pem");
  auto creds = MakeChannelCredentials(client);
  ASSERT_TRUE(creds.ok());

  auto start = [&](const std::string& target) {
    router::WorkerRegistry::Options o;
    o.decode_addresses = {target};
    o.load_interval = absl::Milliseconds(20);
    o.dns_refresh = absl::Milliseconds(20);
    o.credentials = *creds;
    o.resolver = [](const std::string& host) -> absl::StatusOr<std::vector<std::string>> {
      EXPECT_EQ(host, kTierName);
      return std::vector<std::string>{"127.0.0.1"};
    };
    auto registry = std::make_unique<router::WorkerRegistry>(o);
    registry->Start();
    return registry;
  };
  auto usable = [](const router::WorkerRegistry& r) {
    auto snap = r.snapshot();
    return snap->decode.size() == 1 &&
           router::IsUsable(snap->decode[0], snap->stale_after, absl::Now());
  };

  auto by_name = start(absl::StrCat("dns:///", kTierName, ":", worker.port()));
  EXPECT_TRUE(Eventually([&] { return usable(*by_name); }));
  by_name.reset();

  auto by_ip = start(worker.address());
  absl::SleepFor(absl::Seconds(1));
  EXPECT_FALSE(usable(*by_ip)) << "the certificate names no IP, so this handshake must fail";
}

// The issuer of the certificate an HTTPS context serves.
std::string ServedCertificate(ReloadingTlsContext& tls) {
  X509* cert = SSL_CTX_get0_certificate(tls.Current()->native_handle());
  if (cert == nullptr) return "";
  char* subject = X509_NAME_oneline(X509_get_issuer_name(cert), nullptr, 0);
  std::string out = subject != nullptr ? subject : "";
  OPENSSL_free(subject);
  return out;
}

TEST_F(TlsRotationTest, HttpsContextFollowsTheFiles) {
  TlsContextFiles files;
  files.cert = Path("server.pem");
  files.key = Path("server.key");
  files.reload_interval = absl::ZeroDuration();  // look on every connection
  auto tls = ReloadingTlsContext::Load(files);
  ASSERT_TRUE(tls.ok()) << tls.status();
  const auto first = (*tls)->Current();
  EXPECT_EQ((*tls)->Current(), first) << "unchanged files keep the context";
  EXPECT_EQ(ServedCertificate(**tls), "/CN=ca1");

  ASSERT_TRUE(Install(Path("new.key"), Path("server.key")));
  ASSERT_TRUE(Install(Path("new.pem"), Path("server.pem")));
  const auto renewed = (*tls)->Current();
  EXPECT_NE(renewed, first);
  EXPECT_EQ(ServedCertificate(**tls), "/CN=ca2");

  // A key that does not match the certificate: refused, the renewed pair
  // stays in service.
  ASSERT_TRUE(Install(Path("old.key"), Path("server.key")));
  EXPECT_EQ((*tls)->Current(), renewed);
  ASSERT_TRUE(Install(Path("old.pem"), Path("server.pem")));
  EXPECT_NE((*tls)->Current(), renewed);
  EXPECT_EQ(ServedCertificate(**tls), "/CN=ca1");
}

TEST_F(TlsRotationTest, MismatchedKeyFailsTheStartByName) {
  TlsFiles f = ServerFiles();
  f.key = Path("new.key");  // server.pem is the old certificate
  auto creds = MakeServerCredentials(f);
  ASSERT_FALSE(creds.ok());
  EXPECT_NE(creds.status().message().find("new.key"), std::string::npos) << creds.status();
}

TEST_F(TlsRotationTest, MissingFilesFailTheStartByName) {
  TlsFiles f = ServerFiles();
  f.key = Path("nothere.key");
  auto creds = MakeServerCredentials(f);
  ASSERT_FALSE(creds.ok());
  EXPECT_NE(creds.status().message().find("nothere.key"), std::string::npos) << creds.status();
  TlsFiles client;
  client.ca = Path("nothere.pem");
  auto channel = MakeChannelCredentials(client);
  ASSERT_FALSE(channel.ok());
  EXPECT_NE(channel.status().message().find("nothere.pem"), std::string::npos);
}

}  // namespace
}  // namespace pdserve
