#include "router/router_flags.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/rpc/server_tls_flags.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:50051", "host:port of the public Generation service");
ABSL_FLAG(std::string, http_listen, "0.0.0.0:8000",
          "host:port of the OpenAI-compatible HTTP API (/v1/chat/completions, /v1/completions, "
          "/v1/models, /health, /ready); none = off");
ABSL_FLAG(std::string, served_model_name, "",
          "Model name of the HTTP API (/v1/models; a request's model must match) "
          "('' = the GGUF file's name without .gguf)");
ABSL_FLAG(int64_t, http_read_timeout_ms, 30000,
          "An HTTP client must send each whole request within this (else it is closed)");
ABSL_FLAG(int64_t, http_max_body_bytes, 8 << 20,
          "Largest HTTP request body accepted (larger: 413)");
ABSL_FLAG(std::string, model, "models/SmolLM2-135M-Instruct.Q4_1.gguf",
          "GGUF file; the router loads only its tokenizer and chat template");
ABSL_FLAG(std::vector<std::string>, prefill, {},
          "Prefill workers: host:port or dns:///host:port (every address of the name), "
          "comma-separated (empty: decode workers prefill)");
ABSL_FLAG(std::vector<std::string>, decode, {},
          "Decode workers: host:port or dns:///host:port (every address of the name), "
          "comma-separated (required)");
ABSL_FLAG(int32_t, local_prefill_max_tokens, 0,
          "Prompts with at most this many tokens not cached on the chosen decode worker are "
          "prefilled there (0 = never)");
ABSL_FLAG(int64_t, prefill_saturation_tokens, 0,
          "When every prefill worker has at least this many prompt tokens queued, prefill on "
          "the decode worker instead (0 = never)");
ABSL_FLAG(bool, colocated, false, "Always prefill on the decode worker (the baseline)");
ABSL_FLAG(int32_t, max_queue, 256,
          "Requests in flight beyond this are refused with RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, request_timeout_ms, 0,
          "Default and cap for client deadlines (0 = none: a stream runs until it finishes, "
          "its client's deadline passes or its client hangs up)");
ABSL_FLAG(bool, ready_needs_decode, true,
          "Report ready only while a decode worker is usable; false: ready whenever not "
          "draining (requests then get UNAVAILABLE / HTTP 503 + Retry-After)");
ABSL_FLAG(uint32_t, kv_wait_ms, 10000,
          "How long a decode worker's reservation waits for the KV commit");
ABSL_FLAG(int64_t, drain_timeout_ms, 30000,
          "On SIGTERM, how long in-flight requests may take before they are cancelled");
ABSL_FLAG(int32_t, max_prompt_tokens, 32768, "Longest accepted prompt, in tokens");
ABSL_FLAG(int32_t, max_tokens_limit, 4096, "Largest accepted max_tokens");
ABSL_FLAG(int32_t, max_stop_strings, 8, "Most stop strings per request");
ABSL_FLAG(int32_t, max_stop_string_bytes, 256, "Longest stop string, in bytes");
ABSL_FLAG(std::string, policy_decode, "least_loaded", "least_loaded | round_robin | prefix_aware");
ABSL_FLAG(std::string, policy_prefill, "least_loaded", "least_loaded | round_robin | prefix_aware");
ABSL_FLAG(int32_t, load_poll_ms, 200, "Interval of the workers' load reports (WatchLoad)");
ABSL_FLAG(int32_t, dns_refresh_ms, 5000,
          "How often dns:/// worker targets are re-resolved (workers join and leave the pool)");

ABSL_FLAG(int32_t, metrics_port, 0, "Prometheus /metrics HTTP port (0 = off, -1 = any free port)");
ABSL_FLAG(std::string, port_file, "",
          "Once serving, write the bound ports here (grpc=, metrics=, http= lines): start with port 0 "
          "and read the real ones back");
ABSL_FLAG(int32_t, prefill_retries, 2,
          "Times a request's prefill is retried on another prefill worker (new KV epoch)");
ABSL_FLAG(int32_t, decode_failovers, 2,
          "Times a request moves to another decode worker when its worker fails mid-stream");
ABSL_FLAG(bool, decode_migration, true,
          "A draining decode worker moves streams that would not finish in its drain window "
          "to another decode worker with their KV; false: it cuts them and they are recomputed");
ABSL_FLAG(double, rebalance_kv_utilization, 0,
          "Move a long stream (64+ tokens to go) with its KV off a decode worker whose KV pool is "
          "at least this full (0..1) to one below it with room; one move per worker per 2 load "
          "reports (0 = off)");
ABSL_FLAG(int64_t, prefill_attempt_timeout_ms, 0,
          "A Prefill call running longer is treated as hung and retried "
          "(0 = 3/4 of --kv_wait_ms, which also caps it)");
ABSL_FLAG(int64_t, retry_backoff_ms, 20,
          "Backoff before the first retry; doubles per retry up to 500 ms (jittered)");
ABSL_FLAG(int64_t, failover_wait_ms, 3000,
          "How long a decode failover waits for a decode worker to become live (0 = no wait)");
ABSL_FLAG(int32_t, breaker_failures, 3,
          "Consecutive failures that eject a worker for --breaker_cooldown_ms (0 = off)");
ABSL_FLAG(int64_t, breaker_cooldown_ms, 5000, "How long an ejected worker is avoided");
ABSL_FLAG(std::string, worker_tls_ca, "",
          "PEM CA that signed the workers' certificates; set to talk TLS to workers");
ABSL_FLAG(std::string, worker_tls_cert, "",
          "PEM client certificate the router presents to workers (mutual TLS)");
ABSL_FLAG(std::string, worker_tls_key, "", "PEM private key of --worker_tls_cert");
ABSL_FLAG(std::string, auth_token_file, "",
          "File of bearer tokens (one per line) the public API requires; '' = no auth");
ABSL_FLAG(int32_t, max_streams_per_client, 0,
          "Generate streams one client (token, else IP) may hold open; 0 = no cap");

namespace pdserve::router {

absl::StatusOr<RouterConfig> RouterConfigFromFlags() {
  RouterConfig c;
  c.listen = absl::GetFlag(FLAGS_listen);
  c.http_listen = absl::GetFlag(FLAGS_http_listen);
  c.served_model_name = absl::GetFlag(FLAGS_served_model_name);
  c.http_read_timeout_ms = absl::GetFlag(FLAGS_http_read_timeout_ms);
  c.http_max_body_bytes = absl::GetFlag(FLAGS_http_max_body_bytes);
  c.model_path = absl::GetFlag(FLAGS_model);
  c.prefill_addresses = absl::GetFlag(FLAGS_prefill);
  c.decode_addresses = absl::GetFlag(FLAGS_decode);
  c.local_prefill_max_tokens = absl::GetFlag(FLAGS_local_prefill_max_tokens);
  c.prefill_saturation_tokens = absl::GetFlag(FLAGS_prefill_saturation_tokens);
  c.colocated = absl::GetFlag(FLAGS_colocated);
  c.max_queue = absl::GetFlag(FLAGS_max_queue);
  c.request_timeout_ms = absl::GetFlag(FLAGS_request_timeout_ms);
  c.ready_needs_decode = absl::GetFlag(FLAGS_ready_needs_decode);
  c.kv_wait_ms = absl::GetFlag(FLAGS_kv_wait_ms);
  c.drain_timeout_ms = absl::GetFlag(FLAGS_drain_timeout_ms);
  c.max_prompt_tokens = absl::GetFlag(FLAGS_max_prompt_tokens);
  c.max_tokens_limit = absl::GetFlag(FLAGS_max_tokens_limit);
  c.max_stop_strings = absl::GetFlag(FLAGS_max_stop_strings);
  c.max_stop_string_bytes = absl::GetFlag(FLAGS_max_stop_string_bytes);
  c.load_poll_ms = absl::GetFlag(FLAGS_load_poll_ms);
  c.dns_refresh_ms = absl::GetFlag(FLAGS_dns_refresh_ms);
  c.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  c.port_file = absl::GetFlag(FLAGS_port_file);
  c.prefill_retries = absl::GetFlag(FLAGS_prefill_retries);
  c.decode_failovers = absl::GetFlag(FLAGS_decode_failovers);
  c.decode_migration = absl::GetFlag(FLAGS_decode_migration);
  c.rebalance_kv_utilization = absl::GetFlag(FLAGS_rebalance_kv_utilization);
  c.prefill_attempt_timeout_ms = absl::GetFlag(FLAGS_prefill_attempt_timeout_ms);
  c.retry_backoff_ms = absl::GetFlag(FLAGS_retry_backoff_ms);
  c.failover_wait_ms = absl::GetFlag(FLAGS_failover_wait_ms);
  c.breaker_failures = absl::GetFlag(FLAGS_breaker_failures);
  c.breaker_cooldown_ms = absl::GetFlag(FLAGS_breaker_cooldown_ms);
  c.tls = ServerTlsFilesFromFlags();
  c.worker_tls.ca = absl::GetFlag(FLAGS_worker_tls_ca);
  c.worker_tls.cert = absl::GetFlag(FLAGS_worker_tls_cert);
  c.worker_tls.key = absl::GetFlag(FLAGS_worker_tls_key);
  c.worker_tls.reload_interval = TlsReloadIntervalFromFlags();
  c.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  c.max_streams_per_client = absl::GetFlag(FLAGS_max_streams_per_client);
  absl::StatusOr<PolicyKind> decode = ParsePolicyKind(absl::GetFlag(FLAGS_policy_decode));
  if (!decode.ok())
    return absl::InvalidArgumentError(absl::StrCat("--policy_decode: ", decode.status().message()));
  absl::StatusOr<PolicyKind> prefill = ParsePolicyKind(absl::GetFlag(FLAGS_policy_prefill));
  if (!prefill.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("--policy_prefill: ", prefill.status().message()));
  c.decode_policy = *decode;
  c.prefill_policy = *prefill;
  return c;
}

}  // namespace pdserve::router
