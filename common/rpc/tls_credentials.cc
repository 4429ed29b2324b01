#include "common/rpc/tls_credentials.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/ssl.h>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace pdserve {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::InvalidArgumentError(absl::StrCat("cannot read TLS ", what, " ", path));
  std::stringstream s;
  s << f.rdbuf();
  if (s.str().find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("TLS ", what, " ", path, " is not PEM"));
  }
  return s.str();
}

// The certificate chain and key load into OpenSSL and belong together.
absl::Status CheckPairLoads(const TlsFiles& files) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_method()), SSL_CTX_free);
  if (ctx == nullptr) return absl::InternalError("TLS: cannot make an OpenSSL context");
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), files.cert.c_str()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS certificate ", files.cert, " does not load"));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), files.key.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("TLS key ", files.key,
                                                   " does not load or is not the key of ",
                                                   files.cert));
  }
  return absl::OkStatus();
}

// Checked once at start-up so that a missing, malformed or mismatched file
// fails with its name; the watcher would only log it and fail every
// handshake.
absl::Status CheckReadable(const TlsFiles& files) {
  if (!files.cert.empty()) {
    RETURN_IF_ERROR(ReadPem(files.cert, "certificate").status());
    RETURN_IF_ERROR(ReadPem(files.key, "key").status());
    RETURN_IF_ERROR(CheckPairLoads(files));
  }
  if (!files.ca.empty()) RETURN_IF_ERROR(ReadPem(files.ca, "CA").status());
  return absl::OkStatus();
}

std::shared_ptr<grpc::experimental::FileWatcherCertificateProvider> Watcher(
    const TlsFiles& files) {
  const auto seconds = static_cast<unsigned int>(
      std::max<int64_t>(1, absl::ToInt64Seconds(files.reload_interval)));
  return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key, files.cert, files.ca, seconds);
}

absl::Status CheckPair(const TlsFiles& files) {
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError("a TLS certificate and its key go together; set both");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files) {
  if (files.empty()) return grpc::InsecureServerCredentials();
  RETURN_IF_ERROR(CheckPair(files));
  if (files.cert.empty()) {
    return absl::InvalidArgumentError("a client CA needs the server's own certificate and key");
  }
  RETURN_IF_ERROR(CheckReadable(files));
  grpc::experimental::TlsServerCredentialsOptions options(Watcher(files));
  options.watch_identity_key_cert_pairs();
  if (!files.ca.empty()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files) {
  if (files.empty()) return grpc::InsecureChannelCredentials();
  RETURN_IF_ERROR(CheckPair(files));
  if (files.ca.empty()) {
    // System roots would silently trust any public CA for an internal
    // service; pdserve asks for the CA explicitly.
    return absl::InvalidArgumentError("TLS to a server needs the CA that signed its certificate");
  }
  RETURN_IF_ERROR(CheckReadable(files));
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(Watcher(files));
  options.watch_root_certs();
  if (!files.cert.empty()) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  // The server's certificate must name the host dialled (or the channel's
  // GRPC_SSL_TARGET_NAME_OVERRIDE_ARG), as with grpc::SslCredentials.
  options.set_certificate_verifier(
      std::make_shared<grpc::experimental::HostNameCertificateVerifier>());
  return grpc::experimental::TlsCredentials(options);
}

std::string DescribeServerTls(const TlsFiles& files) {
  if (files.cert.empty()) return "insecure";
  return files.ca.empty() ? "TLS" : "mutual TLS";
}

}  // namespace pdserve
