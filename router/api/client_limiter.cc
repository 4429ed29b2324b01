#include "router/api/client_limiter.h"

#include "absl/strings/match.h"

namespace pdserve::router {

bool ClientLimiter::TryAcquire(const std::string& client) {
  absl::MutexLock lock(&mu_);
  int& n = open_[client];
  if (max_ > 0 && n >= max_) {
    if (n == 0) open_.erase(client);
    return false;
  }
  ++n;
  return true;
}

void ClientLimiter::Release(const std::string& client) {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(client);
  if (it == open_.end()) return;
  // Entries go when they reach zero, so the map holds only active clients.
  if (--it->second <= 0) open_.erase(it);
}

int ClientLimiter::open(const std::string& client) const {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(client);
  return it == open_.end() ? 0 : it->second;
}

std::string PeerHost(absl::string_view peer) {
  for (absl::string_view scheme : {"ipv4:", "ipv6:"}) {
    if (absl::StartsWith(peer, scheme)) {
      peer.remove_prefix(scheme.size());
      const size_t colon = peer.rfind(':');
      if (colon != absl::string_view::npos) peer = peer.substr(0, colon);
      return std::string(peer);
    }
  }
  return std::string(peer);  // unix sockets and the like: the whole name
}

}  // namespace pdserve::router
