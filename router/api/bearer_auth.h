// BearerAuth: optional bearer-token authentication of the public API. The
// token file holds one token per line (blank lines and '#' comments
// skipped); several lines allow rotation without downtime. A call must
// carry `authorization: Bearer <token>` metadata matching one of them, or
// it ends UNAUTHENTICATED before any work.
//
// The file is re-read at most every reload_interval, when a call is
// checked: tokens added to or removed from it (a Kubernetes Secret's update
// reaching the mounted file) apply without a restart. A file that can no
// longer be read or holds no token is logged and the last good set stays.
//
// Callers are identified by the line of their token ("token-3"), never by
// the token itself, so logs and per-client limits can name them safely.
//
// Thread-safety: Check and CheckHeader may be called concurrently.
#ifndef PDSERVE_ROUTER_API_BEARER_AUTH_H_
#define PDSERVE_ROUTER_API_BEARER_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pdserve::router {

class BearerAuth {
 public:
  // INVALID_ARGUMENT when the file is unreadable or holds no token.
  static absl::StatusOr<BearerAuth> Load(const std::string& path,
                                         absl::Duration reload_interval = absl::Seconds(10));
  // A fixed set, never reloaded.
  explicit BearerAuth(std::vector<std::string> tokens);

  // The caller's identity, or UNAUTHENTICATED saying what was wrong.
  absl::StatusOr<std::string> Check(const grpc::ServerContextBase& context) const;
  // The same on a raw header value ("Bearer abc").
  absl::StatusOr<std::string> CheckHeader(absl::string_view header) const;

 private:
  using TokenList = std::shared_ptr<const std::vector<std::string>>;
  // Shared by copies of this object (it is held by value in an optional).
  struct State {
    std::string path;  // "" = fixed set
    absl::Duration reload_interval;
    absl::Mutex mu;
    TokenList tokens ABSL_GUARDED_BY(mu);
    absl::Time next_check ABSL_GUARDED_BY(mu);
    std::string last_error ABSL_GUARDED_BY(mu);  // logged once per change
  };
  // The tokens in force, re-read first when the interval has passed.
  TokenList Tokens() const;

  std::shared_ptr<State> state_;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_API_BEARER_AUTH_H_
