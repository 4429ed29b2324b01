// RouterConfig: everything pdserve-router is configured with, as one plain
// struct. router_flags.cc fills it from command-line flags; tests build it
// directly. Validate() is the single place that decides whether a
// configuration can serve, so a bad flag fails at start-up with a message
// instead of surfacing later as a confusing request error.
//
// A value type; not synchronised (copy it, or share it read-only).
#ifndef PDSERVE_ROUTER_CONFIG_ROUTER_CONFIG_H_
#define PDSERVE_ROUTER_CONFIG_ROUTER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/rpc/tls_credentials.h"
#include "router/config/router_options.h"

namespace pdserve::router {

struct RouterConfig {
  // Where the public Generation service listens ("host:port"; port 0 picks
  // a free port, which tests use).
  std::string listen = "0.0.0.0:50051";
  // Where the OpenAI-compatible HTTP API listens ("host:port"; port 0 picks
  // a free port; "none" = no HTTP API), and the model name it serves
  // ("" = the GGUF file's name without ".gguf").
  std::string http_listen = "0.0.0.0:8000";
  std::string served_model_name;
  // An HTTP client must send each whole request (headers and body) within
  // this, counted from the connection or the end of the previous response;
  // a trickler or an idle keep-alive connection is closed.
  int64_t http_read_timeout_ms = 30000;
  // Largest accepted HTTP request body.
  int64_t http_max_body_bytes = 8 << 20;
  // GGUF file; the router loads only its tokenizer and chat template.
  std::string model_path;
  // Worker targets: "host:port" (one worker) or "dns:///host:port" (one
  // worker per address the name resolves to, re-resolved every
  // dns_refresh_ms; worker_target.h). Prefill may be empty (every request
  // is then prefilled by its decode worker); decode may not.
  std::vector<std::string> prefill_addresses;
  std::vector<std::string> decode_addresses;

  // Prompts whose part the chosen decode worker does not hold in its
  // prefix cache has at most this many tokens are prefilled on the decode
  // worker: for a short uncached part the KV hand-off costs more than it
  // saves (0 = never).
  int32_t local_prefill_max_tokens = 0;
  // When every usable prefill worker has at least this many prompt tokens
  // queued, the prefill tier is saturated and requests are prefilled on
  // their decode worker instead of queueing behind it (0 = never).
  int64_t prefill_saturation_tokens = 0;
  // Always prefill on the decode worker (the colocated baseline).
  bool colocated = false;

  // Requests in flight (admitted and not yet finished) beyond this get
  // RESOURCE_EXHAUSTED at once rather than queueing without bound.
  int32_t max_queue = 256;
  // Cap on, and default for, a client's deadline; 0: none of the server's
  // own. A healthy stream is not cut by default (as vLLM and llama-server
  // do not): a client without a deadline (every HTTP client) runs until it
  // finishes or hangs up, and the progress watchdog still ends a stream
  // whose worker stalls.
  int64_t request_timeout_ms = 0;
  // How long a decode worker holds a reservation waiting for the KV commit.
  uint32_t kv_wait_ms = 10000;
  // Ready (gRPC health, /readyz, /ready) only while a decode worker is
  // usable; false: ready whenever not draining, so that a load balancer
  // keeps sending requests, which then get UNAVAILABLE / HTTP 503 with
  // Retry-After while the decode pool is empty (a rollout, a scale from
  // zero) instead of connections refused.
  bool ready_needs_decode = true;
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
  // Prometheus /metrics on 0.0.0.0:metrics_port; 0 = no metrics server,
  // kAnyMetricsPort = one the kernel picks (see port_file).
  int32_t metrics_port = 0;
  // Written once the router serves: the ports it bound
  // (common/rpc/port_file.h); "" = none.
  std::string port_file;

  // Fault tolerance (docs/OPERATIONS.md, "Failure semantics"): how often a
  // request may retry its prefill on another prefill worker, and move to
  // another decode worker mid-stream; how long one Prefill attempt may take
  // before the worker counts as hung (0 = 3/4 of kv_wait_ms, which bounds
  // each epoch on the decode side, and never more than that); the first
  // retry's backoff.
  int32_t prefill_retries = 2;
  int32_t decode_failovers = 2;
  // Let a draining decode worker move its streams to another one with
  // their KV (DecodeRequest.accepts_migration) instead of cutting them
  // (a recompute failover follows then).
  bool decode_migration = true;
  // Rebalancing (0 = off): a long stream on a decode worker whose KV pool
  // is at least this full (0..1) moves with its KV to one below it that
  // has room, instead of the full one refusing new requests.
  double rebalance_kv_utilization = 0;
  int64_t prefill_attempt_timeout_ms = 0;
  int64_t retry_backoff_ms = 20;
  // How long a decode failover waits for a decode worker to become live.
  int64_t failover_wait_ms = 3000;
  // Circuit breaking: consecutive failures that eject a worker (0 = off)
  // and for how long.
  int32_t breaker_failures = 3;
  int64_t breaker_cooldown_ms = 5000;

  // Security (docs/OPERATIONS.md, "TLS and authentication"): TLS of the
  // public API (cert/key; a client CA makes it mutual), TLS of the channels
  // to workers (their CA; a cert/key pair presents the router's identity
  // for workers that require mutual TLS), bearer tokens for the public API
  // ("" = no authentication), and the Generate streams one client may hold
  // open at once (0 = no cap; a client is its token, else its IP).
  TlsFiles tls;
  TlsFiles worker_tls;
  std::string auth_token_file;
  int32_t max_streams_per_client = 0;

  RetryOptions retry_options() const;
  bool http_enabled() const { return http_listen != "none"; }
  // served_model_name, or the model file's name.
  std::string ModelName() const;
  CircuitBreakerOptions breaker_options() const;

  // INVALID_ARGUMENT naming the first bad field.
  absl::Status Validate() const;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CONFIG_ROUTER_CONFIG_H_
