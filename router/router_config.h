// RouterConfig: everything pdserve-router is configured with, as one plain
// struct. router_flags.cc fills it from command-line flags; tests build it
// directly. Validate() is the single place that decides whether a
// configuration can serve, so a bad flag fails at start-up with a message
// instead of surfacing later as a confusing request error.
//
// A value type; not synchronised (copy it, or share it read-only).
#ifndef PDSERVE_ROUTER_ROUTER_CONFIG_H_
#define PDSERVE_ROUTER_ROUTER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pdserve {

// How a tier's worker is chosen (routing_policy.h).
enum class PolicyKind {
  kLeastLoaded,
  kRoundRobin,
};

// "least_loaded" | "round_robin"; INVALID_ARGUMENT otherwise.
absl::StatusOr<PolicyKind> ParsePolicyKind(absl::string_view name);
const char* PolicyKindName(PolicyKind kind);

struct RouterConfig {
  // Where the public Generation service listens ("host:port"; port 0 picks
  // a free port, which tests use).
  std::string listen = "0.0.0.0:50051";
  // GGUF file; the router loads only its tokenizer and chat template.
  std::string model_path;
  // Worker targets: "host:port" (one worker) or "dns:///host:port" (one
  // worker per address the name resolves to, re-resolved every
  // dns_refresh_ms; worker_target.h). Prefill may be empty (every request
  // is then prefilled by its decode worker); decode may not.
  std::vector<std::string> prefill_addresses;
  std::vector<std::string> decode_addresses;

  // Prompts with at most this many tokens are prefilled on the decode
  // worker: for short prompts the KV hand-off costs more than it saves.
  int32_t local_prefill_max_tokens = 0;
  // Always prefill on the decode worker (the colocated baseline).
  bool colocated = false;

  // Requests in flight (admitted and not yet finished) beyond this get
  // RESOURCE_EXHAUSTED at once rather than queueing without bound.
  int32_t max_queue = 256;
  // Cap on, and default for, a client's deadline.
  int64_t request_timeout_ms = 120000;
  // How long a decode worker holds a reservation waiting for the KV commit.
  uint32_t kv_wait_ms = 10000;
  // On SIGTERM: how long in-flight requests may take to finish.
  int64_t drain_timeout_ms = 30000;

  // Input limits; requests beyond them are rejected before any worker sees
  // them.
  int32_t max_prompt_tokens = 32768;
  int32_t max_tokens_limit = 4096;
  int32_t max_stop_strings = 8;
  int32_t max_stop_string_bytes = 256;

  PolicyKind decode_policy = PolicyKind::kLeastLoaded;
  PolicyKind prefill_policy = PolicyKind::kLeastLoaded;
  // Interval of the load reports each worker streams (WatchLoad).
  int32_t load_poll_ms = 200;
  // How often dns:/// targets are re-resolved.
  int32_t dns_refresh_ms = 5000;
  // Prometheus /metrics on 0.0.0.0:metrics_port; 0 = no metrics server.
  int32_t metrics_port = 0;

  // INVALID_ARGUMENT naming the first bad field.
  absl::Status Validate() const;
};

}  // namespace pdserve

#endif  // PDSERVE_ROUTER_ROUTER_CONFIG_H_
