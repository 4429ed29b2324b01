// The TLS context of a worker's KV data plane (--kv_tls): the worker's own
// certificate (--tls_cert, --tls_key), presented to every KV peer, and the
// CA its peers' certificates must chain to (--tls_client_ca, the CA that
// signs both tiers' certificates in one deployment). Receivers (decode)
// and senders (prefill, and decode workers migrating streams) use the same
// context, so both ends of every KV connection are authenticated and the
// bytes are encrypted. The files are re-read as they rotate
// (common/tls/reloading_tls_context.h).
#ifndef PDSERVE_COMMON_WORKER_KV_TLS_CONTEXT_H_
#define PDSERVE_COMMON_WORKER_KV_TLS_CONTEXT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/tls/reloading_tls_context.h"
#include "common/worker/worker_config.h"

namespace pdserve {

// Null without --kv_tls; INVALID_ARGUMENT when it lacks a certificate, key
// or CA, or when they do not load.
absl::StatusOr<std::shared_ptr<ReloadingTlsContext>> KvTlsContext(const WorkerConfig& config);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_WORKER_KV_TLS_CONTEXT_H_
