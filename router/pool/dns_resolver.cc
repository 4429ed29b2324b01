#include "router/pool/dns_resolver.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pdserve::router {
namespace {

// The numeric form of one resolved address; empty for other families.
std::string ToIpLiteral(const addrinfo& ai) {
  char buf[INET6_ADDRSTRLEN] = {};
  const void* src = nullptr;
  if (ai.ai_family == AF_INET) {
    src = &reinterpret_cast<const sockaddr_in*>(ai.ai_addr)->sin_addr;
  } else if (ai.ai_family == AF_INET6) {
    src = &reinterpret_cast<const sockaddr_in6*>(ai.ai_addr)->sin6_addr;
  } else {
    return "";
  }
  if (inet_ntop(ai.ai_family, src, buf, sizeof(buf)) == nullptr) return "";
  return buf;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ResolveWithGetAddrInfo(const std::string& host) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;  // A and AAAA
  // One entry per address rather than one per socket type.
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve \"", host, "\": ", gai_strerror(rc)));
  }
  std::vector<std::string> ips;
  for (const addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    std::string ip = ToIpLiteral(*ai);
    if (!ip.empty()) ips.push_back(std::move(ip));
  }
  freeaddrinfo(result);
  std::sort(ips.begin(), ips.end());
  ips.erase(std::unique(ips.begin(), ips.end()), ips.end());
  return ips;
}

}  // namespace pdserve::router
