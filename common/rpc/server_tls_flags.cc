#include "common/rpc/server_tls_flags.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain to serve gRPC over TLS ('' = plaintext)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA; when set, clients must present a certificate it signed (mutual TLS)");
ABSL_FLAG(int32_t, tls_reload_s, 10,
          "Seconds between re-reads of every TLS file this process uses (server and client "
          "side; the router's --auth_token_file too): renewed certificates apply to new "
          "connections, changed tokens to new calls, without a restart");

namespace pdserve {

TlsFiles ServerTlsFilesFromFlags() {
  TlsFiles t;
  t.cert = absl::GetFlag(FLAGS_tls_cert);
  t.key = absl::GetFlag(FLAGS_tls_key);
  t.ca = absl::GetFlag(FLAGS_tls_client_ca);
  t.reload_interval = TlsReloadIntervalFromFlags();
  return t;
}

absl::Duration TlsReloadIntervalFromFlags() {
  return absl::Seconds(std::max(1, absl::GetFlag(FLAGS_tls_reload_s)));
}

}  // namespace pdserve
