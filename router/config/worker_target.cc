#include "router/config/worker_target.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/base/host_port.h"

namespace pdserve::router {

std::string WorkerTarget::Canonical() const {
  const std::string hp = FormatHostPort(host, port);
  return dns ? absl::StrCat("dns:///", hp) : hp;
}

absl::StatusOr<WorkerTarget> ParseWorkerTarget(absl::string_view text) {
  WorkerTarget target;
  absl::string_view rest = text;
  if (absl::ConsumePrefix(&rest, "dns:")) {
    target.dns = true;
    if (absl::ConsumePrefix(&rest, "//")) {
      // "dns://authority/host:port": only an empty authority is supported.
      if (!absl::ConsumePrefix(&rest, "/")) {
        return absl::InvalidArgumentError(absl::StrCat(
            "\"", text, "\": a DNS server authority is not supported; use dns:///host:port"));
      }
    }
  } else if (absl::StrContains(rest, "://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\": only host:port and dns:///host:port are supported"));
  }
  absl::StatusOr<HostPort> hp = ParseHostPort(rest);
  if (!hp.ok()) return hp.status();
  if (hp->host.empty() || hp->port == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" needs a host and a non-zero port"));
  }
  target.host = std::move(hp->host);
  target.port = hp->port;
  return target;
}

}  // namespace pdserve::router
