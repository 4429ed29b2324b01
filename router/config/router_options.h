// The options each part of the router takes: RouterConfig (router_config.h)
// holds the operator's flat settings and hands every part only its own
// struct from here, so a part depends on this leaf and never on the whole
// configuration (as LevelDB's options.h). Plain values; nothing here
// includes another router header.
#ifndef PDSERVE_ROUTER_CONFIG_ROUTER_OPTIONS_H_
#define PDSERVE_ROUTER_CONFIG_ROUTER_OPTIONS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace pdserve::router {

// How a tier's worker is chosen (placement/placement_policy.h).
enum class PolicyKind {
  kLeastLoaded,
  kRoundRobin,
  kPrefixAware,
};

// "least_loaded" | "round_robin" | "prefix_aware"; INVALID_ARGUMENT
// otherwise.
absl::StatusOr<PolicyKind> ParsePolicyKind(absl::string_view name);
const char* PolicyKindName(PolicyKind kind);

// Per-worker circuit breaking (pool/circuit_breaker.h).
struct CircuitBreakerOptions {
  // Consecutive failures that eject a worker; 0 disables the breaker.
  int failure_threshold = 3;
  absl::Duration cooldown = absl::Seconds(5);
};

// Prefill retries and decode failovers (call/retry_policy.h).
struct RetryOptions {
  int prefill_retries = 2;
  int decode_failovers = 2;
  // Per Prefill attempt: a prefill worker that neither finished nor failed
  // by then is treated as hung and replaced (0 = only the request deadline).
  absl::Duration prefill_attempt_timeout = absl::Milliseconds(7500);
  // A decode failover that finds no live decode worker (e.g. the other one
  // is restarting) polls for one this long before giving up.
  absl::Duration failover_wait = absl::Seconds(3);
  absl::Duration failover_poll = absl::Milliseconds(200);
  // Backoff before retry n (1-based): base * 2^(n-1), capped, jittered down
  // by up to half.
  absl::Duration backoff_base = absl::Milliseconds(20);
  absl::Duration backoff_max = absl::Milliseconds(500);
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CONFIG_ROUTER_OPTIONS_H_
