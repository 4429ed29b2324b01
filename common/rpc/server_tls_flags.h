// The TLS flags every pdserve server process shares (router and workers):
//   --tls_cert, --tls_key   serve TLS with this certificate
//   --tls_client_ca         also require client certificates signed by it
//   --tls_reload_s          how often every TLS file is re-read (rotation)
// Defined once here so the three binaries spell them the same way.
#ifndef PDSERVE_COMMON_RPC_SERVER_TLS_FLAGS_H_
#define PDSERVE_COMMON_RPC_SERVER_TLS_FLAGS_H_

#include "common/rpc/tls_credentials.h"

namespace pdserve {

TlsFiles ServerTlsFilesFromFlags();
// --tls_reload_s, for the TLS files a process uses as a client.
absl::Duration TlsReloadIntervalFromFlags();

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RPC_SERVER_TLS_FLAGS_H_
