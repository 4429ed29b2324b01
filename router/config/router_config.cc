#include "router/config/router_config.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/base/host_port.h"
#include "common/base/status_macros.h"
#include "common/metrics/metrics_http_server.h"
#include "router/config/worker_target.h"

namespace pdserve::router {
namespace {

absl::Status CheckAddresses(absl::string_view flag, const std::vector<std::string>& addresses,
                            absl::flat_hash_set<std::string>* seen) {
  for (const std::string& address : addresses) {
    absl::StatusOr<WorkerTarget> target = ParseWorkerTarget(address);
    if (!target.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", target.status().message()));
    }
    // Two spellings of one target would double its workers.
    if (!seen->insert(target->Canonical()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": worker \"", address, "\" is listed twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPositive(absl::string_view flag, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " = ", value, " must be > 0"));
}

}  // namespace

absl::StatusOr<PolicyKind> ParsePolicyKind(absl::string_view name) {
  if (name == "least_loaded") return PolicyKind::kLeastLoaded;
  if (name == "round_robin") return PolicyKind::kRoundRobin;
  if (name == "prefix_aware") return PolicyKind::kPrefixAware;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown policy \"", std::string(name),
                   "\" (expected least_loaded, round_robin or prefix_aware)"));
}

const char* PolicyKindName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kRoundRobin:
      return "round_robin";
    case PolicyKind::kPrefixAware:
      return "prefix_aware";
    case PolicyKind::kLeastLoaded:
      break;
  }
  return "least_loaded";
}

std::string RouterConfig::ModelName() const {
  if (!served_model_name.empty()) return served_model_name;
  absl::string_view name = model_path;
  if (size_t slash = name.rfind('/'); slash != absl::string_view::npos) {
    name.remove_prefix(slash + 1);
  }
  absl::ConsumeSuffix(&name, ".gguf");
  return std::string(name);
}

absl::Status RouterConfig::Validate() const {
  absl::StatusOr<HostPort> listen_hp = ParseHostPort(listen);
  if (!listen_hp.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--listen: ", listen_hp.status().message()));
  }
  if (http_enabled()) {
    absl::StatusOr<HostPort> http_hp = ParseHostPort(http_listen);
    if (!http_hp.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--http_listen: ", http_hp.status().message(), " (or \"none\")"));
    }
  }
  RETURN_IF_ERROR(CheckPositive("http_read_timeout_ms", http_read_timeout_ms));
  RETURN_IF_ERROR(CheckPositive("http_max_body_bytes", http_max_body_bytes));
  if (model_path.empty()) return absl::InvalidArgumentError("--model is required");
  if (decode_addresses.empty()) {
    return absl::InvalidArgumentError("--decode needs at least one host:port");
  }
  absl::flat_hash_set<std::string> seen;
  RETURN_IF_ERROR(CheckAddresses("decode", decode_addresses, &seen));
  RETURN_IF_ERROR(CheckAddresses("prefill", prefill_addresses, &seen));
  if (local_prefill_max_tokens < 0) {
    return absl::InvalidArgumentError("--local_prefill_max_tokens must be >= 0");
  }
  if (prefill_saturation_tokens < 0) {
    return absl::InvalidArgumentError("--prefill_saturation_tokens must be >= 0");
  }
  RETURN_IF_ERROR(CheckPositive("max_queue", max_queue));
  if (max_streams_per_client < 0) {
    return absl::InvalidArgumentError("max_streams_per_client must be >= 0");
  }
  if (request_timeout_ms < 0) {
    return absl::InvalidArgumentError("--request_timeout_ms must be >= 0 (0 = no server limit)");
  }
  RETURN_IF_ERROR(CheckPositive("kv_wait_ms", kv_wait_ms));
  RETURN_IF_ERROR(CheckPositive("drain_timeout_ms", drain_timeout_ms));
  RETURN_IF_ERROR(CheckPositive("max_prompt_tokens", max_prompt_tokens));
  RETURN_IF_ERROR(CheckPositive("max_tokens_limit", max_tokens_limit));
  RETURN_IF_ERROR(CheckPositive("max_stop_string_bytes", max_stop_string_bytes));
  RETURN_IF_ERROR(CheckPositive("load_poll_ms", load_poll_ms));
  RETURN_IF_ERROR(CheckPositive("dns_refresh_ms", dns_refresh_ms));
  if (max_stop_strings < 0) return absl::InvalidArgumentError("--max_stop_strings must be >= 0");
  RETURN_IF_ERROR(ValidateMetricsPort(metrics_port));
  if (prefill_retries < 0 || decode_failovers < 0 || breaker_failures < 0) {
    return absl::InvalidArgumentError(
        "--prefill_retries, --decode_failovers and --breaker_failures must be >= 0");
  }
  if (failover_wait_ms < 0) return absl::InvalidArgumentError("--failover_wait_ms must be >= 0");
  if (!(rebalance_kv_utilization >= 0 && rebalance_kv_utilization <= 1)) {
    return absl::InvalidArgumentError("--rebalance_kv_utilization must be in [0, 1] (0 = off)");
  }
  if (prefill_attempt_timeout_ms < 0) {
    return absl::InvalidArgumentError("--prefill_attempt_timeout_ms must be >= 0");
  }
  RETURN_IF_ERROR(CheckPositive("retry_backoff_ms", retry_backoff_ms));
  RETURN_IF_ERROR(CheckPositive("breaker_cooldown_ms", breaker_cooldown_ms));
  return absl::OkStatus();
}

RetryOptions RouterConfig::retry_options() const {
  RetryOptions o;
  o.prefill_retries = prefill_retries;
  o.decode_failovers = decode_failovers;
  // A hung prefill worker must be replaced before the decode worker's wait
  // for its KV (per epoch) ends the request: at most 3/4 of kv_wait_ms.
  const int64_t cap = int64_t{kv_wait_ms} * 3 / 4;
  o.prefill_attempt_timeout = absl::Milliseconds(
      prefill_attempt_timeout_ms > 0 ? std::min(prefill_attempt_timeout_ms, cap) : cap);
  o.backoff_base = absl::Milliseconds(retry_backoff_ms);
  o.failover_wait = absl::Milliseconds(failover_wait_ms);
  o.backoff_max = std::max(o.backoff_base, absl::Milliseconds(500));
  return o;
}

CircuitBreakerOptions RouterConfig::breaker_options() const {
  return {breaker_failures, absl::Milliseconds(breaker_cooldown_ms)};
}

}  // namespace pdserve::router
