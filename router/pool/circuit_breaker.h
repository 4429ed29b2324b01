// CircuitBreaker: ejects a worker that failed requests several times in a
// row, for a cool-down, so that new requests stop being sent to a worker
// that is crashing, hung or unreachable before its load stream notices.
// Ejected workers are only skipped while another usable worker remains
// (routing_policy.h); a success closes the circuit again.
//
// The policy itself is the pure function NextBreakerState, table-tested in
// tests/unit/router/pool/circuit_breaker_test.cc; the class only keeps one state per
// worker address.
//
// Thread-safe: every GenerateCall reports to the router's one instance.
#ifndef PDSERVE_ROUTER_POOL_CIRCUIT_BREAKER_H_
#define PDSERVE_ROUTER_POOL_CIRCUIT_BREAKER_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "router/config/router_options.h"

namespace pdserve::router {

struct BreakerState {
  int consecutive_failures = 0;
  absl::Time ejected_until = absl::InfinitePast();
  absl::Time last_failure = absl::InfinitePast();  // when the last counted one happened

  bool ejected(absl::Time now) const { return now < ejected_until; }
};

// The state after one outcome of a request on the worker. A failure while
// ejected does not extend the cool-down (requests that were already in
// flight when it broke keep failing); the first failure after the
// cool-down ejects it again at once (half-open: one probe decides).
// A failure of an attempt that started before the last counted failure is
// the same incident (one crash fails every request in flight at once) and
// is not counted again: "consecutive" means requests sent after the worker
// had already failed one. `attempt_started` = InfiniteFuture counts always.
BreakerState NextBreakerState(const BreakerState& state, bool success, absl::Time now,
                              const CircuitBreakerOptions& options,
                              absl::Time attempt_started = absl::InfiniteFuture());

class CircuitBreaker {
 public:
  explicit CircuitBreaker(CircuitBreakerOptions options) : options_(options) {}

  void RecordSuccess(const std::string& address);
  // Returns true when this failure ejected the worker. `attempt_started`:
  // when the failed attempt was sent (see NextBreakerState).
  bool RecordFailure(const std::string& address, absl::Time now,
                     absl::Time attempt_started = absl::InfiniteFuture());
  // Workers ejected at `now`.
  std::vector<std::string> Ejected(absl::Time now) const;

 private:
  const CircuitBreakerOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, BreakerState> states_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_POOL_CIRCUIT_BREAKER_H_
