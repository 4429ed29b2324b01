// Retry policy of the router's request state machine, as pure functions
// (table-tested in tests/unit/router/call/retry_policy_test.cc): which worker failures
// another worker may fix, and how long to back off before the next try.
//
//   prefill retry: a Prefill call failed while its decode worker still holds
//     the reservation; retried on another prefill worker under a new epoch,
//     up to RetryOptions::prefill_retries times.
//   decode failover: a Decode stream broke mid-stream; the request moves to
//     another decode worker with the tokens generated so far, up to
//     RetryOptions::decode_failovers times.
//
// Thread-safe: no state.
#ifndef PDSERVE_ROUTER_CALL_RETRY_POLICY_H_
#define PDSERVE_ROUTER_CALL_RETRY_POLICY_H_

#include "absl/time/time.h"
#include "grpcpp/support/status.h"
#include "router/config/router_options.h"

namespace pdserve::router {

// True when the failure says the worker (or the path to it) broke, not the
// request: another worker may well succeed. `deadline_passed` is whether
// the request's own deadline is over (then nothing is retried).
bool IsRetryableWorkerFailure(const grpc::Status& status, bool deadline_passed);

// The decode-side subset: the stream broke (worker died, transport error),
// as opposed to the worker's own verdict on the request. A worker-side
// DEADLINE_EXCEEDED (its KV wait ran out) or RESOURCE_EXHAUSTED is not
// failed over.
bool IsRetryableDecodeFailure(const grpc::Status& status, bool deadline_passed);

// Whether a failed prefill attempt counts against its worker in the circuit
// breaker: the worker (or the path to it) broke. A verdict on the request
// (RESOURCE_EXHAUSTED for a prompt the pool cannot hold, bad input,
// incompatibility, a KV secret it does not share), a KV transfer the decode
// side ended, or a timeout (a busy worker's queue times attempts out too)
// says nothing about its health: such requests must not eject a healthy
// worker.
bool IsWorkerHealthFailure(const grpc::Status& status);

// Delay before retry number `retry` (1 = the first); `jitter` in [0, 1).
absl::Duration RetryBackoff(const RetryOptions& options, int retry, double jitter);

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_RETRY_POLICY_H_
