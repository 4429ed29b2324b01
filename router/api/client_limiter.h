// ClientLimiter: caps the Generate streams one client may have open at once,
// so that one caller cannot take every admission slot of the router. A
// client is its bearer-token identity when auth is on, else its peer IP.
//
// Thread-safety: thread-safe.
#ifndef PDSERVE_ROUTER_API_CLIENT_LIMITER_H_
#define PDSERVE_ROUTER_API_CLIENT_LIMITER_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace pdserve::router {

class ClientLimiter {
 public:
  // 0 = no limit.
  explicit ClientLimiter(int max_per_client) : max_(max_per_client) {}

  // False when `client` is at the limit; true takes a slot that Release
  // must give back.
  bool TryAcquire(const std::string& client);
  void Release(const std::string& client);
  int open(const std::string& client) const;

 private:
  const int max_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, int> open_ ABSL_GUARDED_BY(mu_);
};

// "ipv4:10.0.0.7:51234" -> "10.0.0.7": the port changes per connection.
std::string PeerHost(absl::string_view peer);

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_API_CLIENT_LIMITER_H_
