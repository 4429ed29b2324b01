// DecodeAttempts: the decode workers one request has tried and why each
// refused. A Decode stream that fails with RESOURCE_EXHAUSTED or
// UNAVAILABLE before its first event has produced nothing, so the request
// moves to another decode worker as if placed there first; each worker is
// tried at most once, which bounds the retries by the size of the tier.
//
// Not thread-safe (owned by GenerateFsm, which GenerateCall serialises).
#ifndef PDSERVE_ROUTER_CALL_DECODE_ATTEMPTS_H_
#define PDSERVE_ROUTER_CALL_DECODE_ATTEMPTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace pdserve::router {

class DecodeAttempts {
 public:
  // True for a failure, before the first event, that another worker may not
  // share: out of KV capacity, or unreachable.
  static bool IsRetryable(const grpc::Status& status);

  void RecordRefusal(const std::string& address, const grpc::Status& status);

  // Workers not to try again.
  const std::vector<std::string>& excluded() const { return excluded_; }
  // Lets every worker be tried again (a failover that waited for workers
  // to come back: a restarted worker at a failed address is a new process);
  // the refusals stay on record for the message.
  void ForgetExclusions() { excluded_.clear(); }

  // What the client is told when no further worker can be placed: with
  // refusals on record, RESOURCE_EXHAUSTED (all were full) or UNAVAILABLE
  // (some were unreachable), listing each worker's answer; otherwise the
  // placement error itself.
  grpc::Status PlacementFailure(const absl::Status& placement_error) const;

 private:
  std::vector<std::string> excluded_;
  std::vector<std::string> reasons_;
  bool any_unavailable_ = false;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_DECODE_ATTEMPTS_H_
