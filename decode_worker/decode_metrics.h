// The decode worker's Prometheus gauges and counters, read from the engine loop and the
// KV receiver at scrape time (no bookkeeping on the hot path).
// pdserve_decode_kv_blocks_utilization drives the decode HPA
// (deploy/k8s/prometheus-adapter/values.yaml): keep its name and meaning.
#ifndef PDSERVE_DECODE_WORKER_DECODE_METRICS_H_
#define PDSERVE_DECODE_WORKER_DECODE_METRICS_H_

#include "common/metrics/metrics_registry.h"
#include "decode_worker/decode_context.h"

namespace pdserve::decode {

// `ctx`'s loop and receiver must outlive every scrape of `registry`.
void RegisterDecodeMetrics(const DecodeContext* ctx, MetricsRegistry* registry);

}  // namespace pdserve::decode

#endif  // PDSERVE_DECODE_WORKER_DECODE_METRICS_H_
