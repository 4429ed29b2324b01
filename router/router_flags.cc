#include "router/router_flags.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:50051", "host:port of the public Generation service");
ABSL_FLAG(std::string, model, "models/SmolLM2-135M-Instruct.Q4_1.gguf",
          "GGUF file; the router loads only its tokenizer and chat template");
ABSL_FLAG(std::vector<std::string>, prefill, {},
          "Prefill workers: host:port or dns:///host:port (every address of the name), "
          "comma-separated (empty: decode workers prefill)");
ABSL_FLAG(std::vector<std::string>, decode, {},
          "Decode workers: host:port or dns:///host:port (every address of the name), "
          "comma-separated (required)");
ABSL_FLAG(int32_t, local_prefill_max_tokens, 0,
          "Prompts with at most this many tokens are prefilled on the decode worker (0 = never)");
ABSL_FLAG(bool, colocated, false, "Always prefill on the decode worker (the baseline)");
ABSL_FLAG(int32_t, max_queue, 256,
          "Requests in flight beyond this are refused with RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, request_timeout_ms, 120000, "Default and cap for client deadlines");
ABSL_FLAG(uint32_t, kv_wait_ms, 10000,
          "How long a decode worker's reservation waits for the KV commit");
ABSL_FLAG(int64_t, drain_timeout_ms, 30000,
          "On SIGTERM, how long in-flight requests may take before they are cancelled");
ABSL_FLAG(int32_t, max_prompt_tokens, 32768, "Longest accepted prompt, in tokens");
ABSL_FLAG(int32_t, max_tokens_limit, 4096, "Largest accepted max_tokens");
ABSL_FLAG(int32_t, max_stop_strings, 8, "Most stop strings per request");
ABSL_FLAG(int32_t, max_stop_string_bytes, 256, "Longest stop string, in bytes");
ABSL_FLAG(std::string, policy_decode, "least_loaded", "least_loaded | round_robin");
ABSL_FLAG(std::string, policy_prefill, "least_loaded", "least_loaded | round_robin");
ABSL_FLAG(int32_t, load_poll_ms, 200, "Interval of the workers' load reports (WatchLoad)");
ABSL_FLAG(int32_t, dns_refresh_ms, 5000,
          "How often dns:/// worker targets are re-resolved (workers join and leave the pool)");

ABSL_FLAG(int32_t, metrics_port, 0, "Prometheus /metrics HTTP port (0 = off)");

namespace pdserve {

absl::StatusOr<RouterConfig> RouterConfigFromFlags() {
  RouterConfig c;
  c.listen = absl::GetFlag(FLAGS_listen);
  c.model_path = absl::GetFlag(FLAGS_model);
  c.prefill_addresses = absl::GetFlag(FLAGS_prefill);
  c.decode_addresses = absl::GetFlag(FLAGS_decode);
  c.local_prefill_max_tokens = absl::GetFlag(FLAGS_local_prefill_max_tokens);
  c.colocated = absl::GetFlag(FLAGS_colocated);
  c.max_queue = absl::GetFlag(FLAGS_max_queue);
  c.request_timeout_ms = absl::GetFlag(FLAGS_request_timeout_ms);
  c.kv_wait_ms = absl::GetFlag(FLAGS_kv_wait_ms);
  c.drain_timeout_ms = absl::GetFlag(FLAGS_drain_timeout_ms);
  c.max_prompt_tokens = absl::GetFlag(FLAGS_max_prompt_tokens);
  c.max_tokens_limit = absl::GetFlag(FLAGS_max_tokens_limit);
  c.max_stop_strings = absl::GetFlag(FLAGS_max_stop_strings);
  c.max_stop_string_bytes = absl::GetFlag(FLAGS_max_stop_string_bytes);
  c.load_poll_ms = absl::GetFlag(FLAGS_load_poll_ms);
  c.dns_refresh_ms = absl::GetFlag(FLAGS_dns_refresh_ms);
  c.metrics_port = absl::GetFlag(FLAGS_metrics_port);
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

}  // namespace pdserve
