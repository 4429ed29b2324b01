#include "tools/bench/client_security.h"

#include <fstream>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/rpc/tls_credentials.h"

ABSL_FLAG(std::string, tls_ca, "", "client: PEM CA of the router's certificate; set = TLS");
ABSL_FLAG(std::string, tls_client_cert, "",
          "client: PEM certificate to present to a router that requires mutual TLS");
ABSL_FLAG(std::string, tls_client_key, "", "client: PEM key of --tls_client_cert");
ABSL_FLAG(std::string, auth_token_file, "",
          "client: file whose first token is sent as 'authorization: Bearer <token>'");

namespace pdserve {
namespace {

absl::StatusOr<std::string> FirstToken(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::InvalidArgumentError(absl::StrCat("cannot read token file ", path));
  for (std::string line; std::getline(f, line);) {
    const absl::string_view t = absl::StripAsciiWhitespace(line);
    if (!t.empty() && !absl::StartsWith(t, "#")) return std::string(t);
  }
  return absl::InvalidArgumentError(absl::StrCat("no token in ", path));
}

}  // namespace

std::shared_ptr<grpc::ChannelCredentials> ClientSecurity::channel_credentials() const {
  return credentials != nullptr ? credentials : grpc::InsecureChannelCredentials();
}

void ClientSecurity::Decorate(grpc::ClientContext* context) const {
  if (!bearer_token.empty()) context->AddMetadata("authorization", "Bearer " + bearer_token);
}

absl::StatusOr<ClientSecurity> ClientSecurityFromFlags() {
  ClientSecurity s;
  TlsFiles tls;
  tls.ca = absl::GetFlag(FLAGS_tls_ca);
  tls.cert = absl::GetFlag(FLAGS_tls_client_cert);
  tls.key = absl::GetFlag(FLAGS_tls_client_key);
  ASSIGN_OR_RETURN(s.credentials, MakeChannelCredentials(tls));
  const std::string token_file = absl::GetFlag(FLAGS_auth_token_file);
  if (!token_file.empty()) {
    ASSIGN_OR_RETURN(s.bearer_token, FirstToken(token_file));
  }
  return s;
}

}  // namespace pdserve
