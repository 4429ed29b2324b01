// "host:port" strings, as used for every listen address and peer endpoint.
#ifndef PDSERVE_COMMON_BASE_HOST_PORT_H_
#define PDSERVE_COMMON_BASE_HOST_PORT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pdserve {

struct HostPort {
  std::string host;  // without IPv6 brackets
  uint16_t port = 0;
};

// Splits "host:port", "[v6addr]:port" or ":port" (empty host). Port 0 is
// allowed (an ephemeral listen port). INVALID_ARGUMENT otherwise.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text);

// The inverse, bracketing IPv6 literals.
std::string FormatHostPort(absl::string_view host, uint16_t port);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_BASE_HOST_PORT_H_
