#include "common/rpc/tls_credentials.h"

#include <fstream>
#include <sstream>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

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
  grpc::SslServerCredentialsOptions options(
      files.ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                       : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.private_key, ReadPem(files.key, "key"));
  ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(files.cert, "certificate"));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!files.ca.empty()) {
    ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(files.ca, "CA"));
  }
  return grpc::SslServerCredentials(options);
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
  grpc::SslCredentialsOptions options;
  ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(files.ca, "CA"));
  if (!files.cert.empty()) {
    ASSIGN_OR_RETURN(options.pem_private_key, ReadPem(files.key, "key"));
    ASSIGN_OR_RETURN(options.pem_cert_chain, ReadPem(files.cert, "certificate"));
  }
  return grpc::SslCredentials(options);
}

std::string DescribeServerTls(const TlsFiles& files) {
  if (files.cert.empty()) return "insecure";
  return files.ca.empty() ? "TLS" : "mutual TLS";
}

}  // namespace pdserve
