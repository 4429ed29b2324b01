#include "router/call/retry_policy.h"

#include <algorithm>

namespace pdserve::router {

bool IsRetryableWorkerFailure(const grpc::Status& status, bool deadline_passed) {
  if (deadline_passed) return false;
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:         // died, unreachable, draining
    case grpc::StatusCode::UNKNOWN:             // stream reset by a dying process
    case grpc::StatusCode::INTERNAL:            // transport error
    case grpc::StatusCode::ABORTED:             // transfer aborted
    case grpc::StatusCode::DATA_LOSS:           // transfer cut mid-payload
    case grpc::StatusCode::DEADLINE_EXCEEDED:   // the attempt's own timeout (hung)
    case grpc::StatusCode::RESOURCE_EXHAUSTED:  // that worker's queue is full
    case grpc::StatusCode::CANCELLED:           // the worker's server cancelled
    case grpc::StatusCode::UNAUTHENTICATED:     // a KV secret this pair does not share:
    case grpc::StatusCode::PERMISSION_DENIED:   // another worker, or local prefill, can serve
      return true;
    default:
      // Bad input, incompatibility, NOT_FOUND: the request itself is at fault
      // or no retry can help.
      return false;
  }
}

bool IsWorkerHealthFailure(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::DATA_LOSS:
      return true;
    default:
      // DEADLINE_EXCEEDED included: an attempt also times out while the
      // prompt waits in a busy worker's queue. A worker that really hung
      // stops its load reports and leaves the pool on its own.
      return false;
  }
}

bool IsRetryableDecodeFailure(const grpc::Status& status, bool deadline_passed) {
  const grpc::StatusCode code = status.error_code();
  return code != grpc::StatusCode::DEADLINE_EXCEEDED &&
         code != grpc::StatusCode::RESOURCE_EXHAUSTED &&
         code != grpc::StatusCode::UNAUTHENTICATED && code != grpc::StatusCode::PERMISSION_DENIED &&
         IsRetryableWorkerFailure(status, deadline_passed);
}

absl::Duration RetryBackoff(const RetryOptions& options, int retry, double jitter) {
  absl::Duration d = options.backoff_base;
  for (int i = 1; i < retry && d < options.backoff_max; ++i) d *= 2;
  d = std::min(d, options.backoff_max);
  jitter = std::clamp(jitter, 0.0, 1.0);
  return d - d * (jitter / 2);
}

}  // namespace pdserve::router
