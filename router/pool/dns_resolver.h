// DnsResolver: a host name to the IP addresses it resolves to. The
// WorkerRegistry takes one as a function so tests can script the answers;
// the product uses ResolveWithGetAddrInfo.
#ifndef PDSERVE_ROUTER_POOL_DNS_RESOLVER_H_
#define PDSERVE_ROUTER_POOL_DNS_RESOLVER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pdserve::router {

// IP literals (IPv6 without brackets), in any order, possibly repeated.
// An error, or an empty list, means "no answer this time".
using DnsResolver = std::function<absl::StatusOr<std::vector<std::string>>(const std::string&)>;

// Every A and AAAA record of `host` through the system resolver
// (getaddrinfo: /etc/hosts, then DNS with the pod's search path), sorted
// and de-duplicated. UNAVAILABLE naming the host when it does not resolve.
// Blocks for as long as the system resolver takes.
absl::StatusOr<std::vector<std::string>> ResolveWithGetAddrInfo(const std::string& host);

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_POOL_DNS_RESOLVER_H_
