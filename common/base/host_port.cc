#include "common/base/host_port.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pdserve {

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("expected host:port, got \"", text, "\""));
  }
  absl::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("IPv6 address needs brackets in \"", text, "\""));
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(text.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in \"", text, "\""));
  }
  return HostPort{std::string(host), static_cast<uint16_t>(port)};
}

std::string FormatHostPort(absl::string_view host, uint16_t port) {
  if (host.find(':') != absl::string_view::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

}  // namespace pdserve
