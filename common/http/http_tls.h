// The TLS context of an HttpServer, from the same PEM files the gRPC
// servers take (--tls_cert, --tls_key, --tls_client_ca), so one set of
// certificate flags secures both APIs of a process. With a client CA the
// server requires and verifies client certificates (mutual TLS), as gRPC
// does. TLS 1.2 or newer.
#ifndef PDSERVE_COMMON_HTTP_HTTP_TLS_H_
#define PDSERVE_COMMON_HTTP_HTTP_TLS_H_

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace pdserve {

// INVALID_ARGUMENT naming the file that is missing, unreadable or not PEM
// of the right kind, or a key that does not match the certificate.
absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> MakeHttpTlsContext(
    const std::string& cert_path, const std::string& key_path, const std::string& client_ca_path);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_HTTP_HTTP_TLS_H_
