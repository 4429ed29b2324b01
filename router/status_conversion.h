// Status helpers for the router's service edge: absl::Status inside,
// grpc::Status on the wire, and how a worker's failure is reported to the
// client (which codes pass through, which become UNAVAILABLE).
#ifndef PDSERVE_ROUTER_STATUS_CONVERSION_H_
#define PDSERVE_ROUTER_STATUS_CONVERSION_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace pdserve {

grpc::Status ToGrpcStatus(const absl::Status& status);

// "RESOURCE_EXHAUSTED", ...
std::string StatusCodeName(grpc::StatusCode code);

// A worker RPC's failure as the client sees it, e.g. "decode worker a:1
// failed: UNAVAILABLE: connection reset". Codes that describe the request
// (deadline, capacity, bad input) pass through; anything else means the
// worker could not serve it: UNAVAILABLE.
grpc::Status WorkerFailureStatus(const char* role, const std::string& address,
                                 const grpc::Status& status);

}  // namespace pdserve

#endif  // PDSERVE_ROUTER_STATUS_CONVERSION_H_
