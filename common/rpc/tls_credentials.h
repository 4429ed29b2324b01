// TLS for pdserve's gRPC surfaces: the public Generation API (server TLS,
// optionally requiring client certificates) and the router -> worker
// control plane (mutual TLS). Everything is PEM files named by flags; with
// no files set, credentials are insecure (loopback and trusted networks).
//
//   server side: cert + key        -> TLS
//                cert + key + ca   -> mutual TLS (client certs signed by ca)
//   client side: ca                -> verify the server against ca
//                ca + cert + key   -> also present a client certificate
//
// The files are read at start-up (a missing or malformed one, or a key
// that is not the certificate's, fails it, named) and then re-read every
// TlsFiles::reload_interval by gRPC's file watcher: a renewed certificate
// or CA (cert-manager rewrites its Secret, the kubelet swaps the mounted
// files atomically) is presented and trusted on new connections without a
// restart; connections already up keep the certificate they were made
// with. gRPC 1.51's watcher does not check that a new key matches its
// certificate: a broken pair fails new handshakes (logged by gRPC) until
// good files are back, which the kubelet's atomic Secret updates never
// produce (the HTTPS and KV side, common/tls/reloading_tls_context.h, does
// check).
//
// Thread-safety: pure functions of their arguments and the files.
#ifndef PDSERVE_COMMON_RPC_TLS_CREDENTIALS_H_
#define PDSERVE_COMMON_RPC_TLS_CREDENTIALS_H_

#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pdserve {

struct TlsFiles {
  std::string cert;  // PEM certificate chain
  std::string key;   // PEM private key of `cert`
  std::string ca;    // PEM roots that the peer's certificate must chain to
  // How often the files are re-read (whole seconds, at least one).
  absl::Duration reload_interval = absl::Seconds(10);

  bool empty() const { return cert.empty() && key.empty() && ca.empty(); }
};

// INVALID_ARGUMENT for an incomplete set (cert without key, ca without a
// server cert) or an unreadable/empty file, naming the file.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files);

// "insecure", "TLS" or "mutual TLS", for start-up logs.
std::string DescribeServerTls(const TlsFiles& files);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RPC_TLS_CREDENTIALS_H_
