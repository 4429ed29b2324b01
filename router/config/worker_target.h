// WorkerTarget: one --prefill/--decode entry. Either a static "host:port"
// (one worker, one channel, as always) or a DNS name ("dns:///host:port" or
// "dns:host:port", gRPC's spelling) that the WorkerRegistry re-resolves
// periodically and expands into one worker per address — in Kubernetes a
// headless Service, whose A/AAAA records are the ready pods.
//
// A value type.
#ifndef PDSERVE_ROUTER_CONFIG_WORKER_TARGET_H_
#define PDSERVE_ROUTER_CONFIG_WORKER_TARGET_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pdserve::router {

struct WorkerTarget {
  bool dns = false;
  std::string host;  // without IPv6 brackets
  uint16_t port = 0;

  // "host:port" for a static target, "dns:///host:port" for a DNS one; two
  // spellings of one target have the same canonical form.
  std::string Canonical() const;
};

// INVALID_ARGUMENT for anything but the forms above with a non-empty host
// and a non-zero port. "dns://authority/..." (a custom DNS server) is
// rejected: the router resolves through the system resolver.
absl::StatusOr<WorkerTarget> ParseWorkerTarget(absl::string_view text);

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CONFIG_WORKER_TARGET_H_
