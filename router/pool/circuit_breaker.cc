#include "router/pool/circuit_breaker.h"

namespace pdserve::router {

BreakerState NextBreakerState(const BreakerState& state, bool success, absl::Time now,
                              const CircuitBreakerOptions& options, absl::Time attempt_started) {
  if (success || options.failure_threshold <= 0) return BreakerState{};
  if (state.ejected(now)) return state;
  if (attempt_started < state.last_failure) return state;  // the same incident
  BreakerState next = state;
  next.last_failure = now;
  // Past a cool-down the count still stands at the threshold, so one more
  // failure re-ejects the worker.
  next.consecutive_failures = state.consecutive_failures + 1;
  if (next.consecutive_failures >= options.failure_threshold) {
    next.ejected_until = now + options.cooldown;
  }
  return next;
}

void CircuitBreaker::RecordSuccess(const std::string& address) {
  absl::MutexLock lock(&mu_);
  states_.erase(address);
}

bool CircuitBreaker::RecordFailure(const std::string& address, absl::Time now,
                                   absl::Time attempt_started) {
  absl::MutexLock lock(&mu_);
  BreakerState& state = states_[address];
  const bool was_ejected = state.ejected(now);
  state = NextBreakerState(state, /*success=*/false, now, options_, attempt_started);
  return !was_ejected && state.ejected(now);
}

std::vector<std::string> CircuitBreaker::Ejected(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [address, state] : states_) {
    if (state.ejected(now)) out.push_back(address);
  }
  return out;
}

}  // namespace pdserve::router
