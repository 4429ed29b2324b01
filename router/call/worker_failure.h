// How a worker's failure is reported to the router's client: which codes
// pass through and which become UNAVAILABLE, with a message naming the
// worker.
#ifndef PDSERVE_ROUTER_CALL_WORKER_FAILURE_H_
#define PDSERVE_ROUTER_CALL_WORKER_FAILURE_H_

#include <string>

#include "grpcpp/support/status.h"

namespace pdserve::router {

// "RESOURCE_EXHAUSTED", ...
std::string StatusCodeName(grpc::StatusCode code);

// A worker RPC's failure as the client sees it, e.g. "decode worker a:1
// failed: UNAVAILABLE: connection reset". Codes that describe the request
// (deadline, capacity, bad input) pass through; anything else means the
// worker could not serve it: UNAVAILABLE.
grpc::Status WorkerFailureStatus(const char* role, const std::string& address,
                                 const grpc::Status& status);

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_WORKER_FAILURE_H_
