// The command-line flags of pdserve-router and their translation into a
// RouterConfig. Part of the binary only (not the pdserve_router library),
// so that tools linking the library can define flags of the same names.
#ifndef PDSERVE_ROUTER_ROUTER_FLAGS_H_
#define PDSERVE_ROUTER_ROUTER_FLAGS_H_

#include "absl/status/statusor.h"
#include "router/config/router_config.h"

namespace pdserve::router {

// INVALID_ARGUMENT for an unknown policy name; Validate() is the caller's.
absl::StatusOr<RouterConfig> RouterConfigFromFlags();

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_ROUTER_FLAGS_H_
