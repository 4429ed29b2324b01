#include "common/worker/kv_tls_context.h"

#include "absl/strings/str_cat.h"

namespace pdserve {

absl::StatusOr<std::shared_ptr<ReloadingTlsContext>> KvTlsContext(const WorkerConfig& config) {
  if (!config.kv_tls) return nullptr;
  if (config.tls.cert.empty() || config.tls.key.empty() || config.tls.ca.empty()) {
    return absl::InvalidArgumentError(
        "--kv_tls needs --tls_cert, --tls_key and --tls_client_ca (the CA that signs both "
        "tiers' certificates)");
  }
  absl::StatusOr<std::shared_ptr<ReloadingTlsContext>> tls = ReloadingTlsContext::Load(
      {config.tls.cert, config.tls.key, config.tls.ca, config.tls.reload_interval});
  if (!tls.ok()) return absl::InvalidArgumentError(absl::StrCat("--kv_tls: ", tls.status().message()));
  return tls;
}

}  // namespace pdserve
