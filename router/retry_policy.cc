#include "router/retry_policy.h"

#include <algorithm>

#include "common/rpc/protocol_version.h"

namespace pdserve {

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

PrefillWindows SizePrefillWindows(const RetryOptions& options, absl::Duration configured_kv_wait,
                                  absl::Duration compute) {
  PrefillWindows w{configured_kv_wait, options.prefill_attempt_timeout};
  if (compute <= absl::ZeroDuration()) return w;
  // Within what a decode worker grants, unless configured beyond it anyway.
  const absl::Duration cap = std::max(configured_kv_wait, absl::Milliseconds(kMaxKvWaitMs));
  w.kv_wait = std::min(std::max(configured_kv_wait, compute * 2 + absl::Seconds(1)), cap);
  if (w.attempt_timeout == absl::ZeroDuration()) return w;
  w.attempt_timeout =
      std::min(std::max(options.prefill_attempt_timeout, compute * 1.5 + absl::Seconds(1)),
               w.kv_wait * 3 / 4);
  return w;
}

absl::Duration RetryBackoff(const RetryOptions& options, int retry, double jitter) {
  absl::Duration d = options.backoff_base;
  for (int i = 1; i < retry && d < options.backoff_max; ++i) d *= 2;
  d = std::min(d, options.backoff_max);
  jitter = std::clamp(jitter, 0.0, 1.0);
  return d - d * (jitter / 2);
}

}  // namespace pdserve
