#include "common/rpc/server_tls_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain to serve gRPC over TLS ('' = plaintext)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA; when set, clients must present a certificate it signed (mutual TLS)");

namespace pdserve {

TlsFiles ServerTlsFilesFromFlags() {
  TlsFiles t;
  t.cert = absl::GetFlag(FLAGS_tls_cert);
  t.key = absl::GetFlag(FLAGS_tls_key);
  t.ca = absl::GetFlag(FLAGS_tls_client_ca);
  return t;
}

}  // namespace pdserve
