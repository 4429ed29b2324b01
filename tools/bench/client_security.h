// ClientSecurity: how pdserve's own clients (`pdserve generate`, `bench`,
// the tests) reach a router that serves TLS and/or requires bearer tokens.
// Flags of the `pdserve` CLI:
//   --tls_ca            PEM CA that signed the router's certificate (TLS on)
//   --tls_client_cert   PEM client certificate, for a router requiring mTLS
//   --tls_client_key    its key
//   --auth_token_file   file whose first token is sent as a bearer token
#ifndef PDSERVE_TOOLS_BENCH_CLIENT_SECURITY_H_
#define PDSERVE_TOOLS_BENCH_CLIENT_SECURITY_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace pdserve {

struct ClientSecurity {
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // null = plaintext
  std::string bearer_token;                               // "" = none

  std::shared_ptr<grpc::ChannelCredentials> channel_credentials() const;
  // Adds the authorization metadata, if any, to a call about to start.
  void Decorate(grpc::ClientContext* context) const;
};

absl::StatusOr<ClientSecurity> ClientSecurityFromFlags();

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_CLIENT_SECURITY_H_
