// BearerAuth: optional bearer-token authentication of the public API. The
// token file holds one token per line (blank lines and '#' comments
// skipped); several lines allow rotation without downtime. A call must
// carry `authorization: Bearer <token>` metadata matching one of them, or
// it ends UNAUTHENTICATED before any work.
//
// Callers are identified by the line of their token ("token-3"), never by
// the token itself, so logs and per-client limits can name them safely.
//
// Thread-safety: immutable after Load; Check may be called concurrently.
#ifndef PDSERVE_ROUTER_BEARER_AUTH_H_
#define PDSERVE_ROUTER_BEARER_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pdserve::router {

class BearerAuth {
 public:
  // INVALID_ARGUMENT when the file is unreadable or holds no token.
  static absl::StatusOr<BearerAuth> Load(const std::string& path);
  explicit BearerAuth(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}

  // The caller's identity, or UNAUTHENTICATED saying what was wrong.
  absl::StatusOr<std::string> Check(const grpc::ServerContextBase& context) const;
  // The same on a raw header value ("Bearer abc").
  absl::StatusOr<std::string> CheckHeader(absl::string_view header) const;

 private:
  std::vector<std::string> tokens_;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_BEARER_AUTH_H_
