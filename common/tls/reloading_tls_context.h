// ReloadingTlsContext: the TLS context of the HTTP front (a server) and of
// both ends of the encrypted KV plane (its senders make client handshakes
// with it), from the same PEM files the gRPC servers take (--tls_cert,
// --tls_key, --tls_client_ca), so one set of certificate flags secures
// every port of a process. With a client CA the peer's certificate is
// required and verified (mutual TLS), as gRPC does. TLS 1.2 or newer.
//
// The files are re-read, at most every reload_interval, when a connection
// arrives: a renewed certificate (cert-manager rewrites its Secret, the
// kubelet swaps the mounted files atomically) gets a new context for the
// connections that follow, without a restart; open connections keep the
// context they were made with. Files that no longer load (a half-finished
// manual copy, a key that does not match) are logged once and the last
// good context stays in use, as gRPC's file watcher does for the gRPC
// ports (common/rpc/tls_credentials.h).
//
// Thread-safety: Current() may be called from any thread.
#ifndef PDSERVE_COMMON_TLS_RELOADING_TLS_CONTEXT_H_
#define PDSERVE_COMMON_TLS_RELOADING_TLS_CONTEXT_H_

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pdserve {

struct TlsContextFiles {
  std::string cert;       // PEM certificate chain
  std::string key;        // PEM private key of `cert`
  std::string client_ca;  // PEM CA of client certificates; "" = none asked
  absl::Duration reload_interval = absl::Seconds(10);
};

class ReloadingTlsContext {
 public:
  // INVALID_ARGUMENT naming the file that is missing, unreadable or not PEM
  // of the right kind, or a key that does not match the certificate.
  static absl::StatusOr<std::shared_ptr<ReloadingTlsContext>> Load(const TlsContextFiles& files);

  // The context for a new connection (see the class comment).
  std::shared_ptr<boost::asio::ssl::context> Current();

 private:
  ReloadingTlsContext(TlsContextFiles files, std::shared_ptr<boost::asio::ssl::context> context,
                      std::string contents);

  const TlsContextFiles files_;
  absl::Mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> context_ ABSL_GUARDED_BY(mu_);
  // The three files' bytes as last loaded, and as last refused: a change is
  // a difference in these, whatever the files' timestamps say.
  std::string loaded_ ABSL_GUARDED_BY(mu_);
  std::string refused_ ABSL_GUARDED_BY(mu_);
  absl::Time next_check_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_TLS_RELOADING_TLS_CONTEXT_H_
