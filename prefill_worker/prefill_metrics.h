// The prefill worker's Prometheus gauges and counters, read from the engine
// loop and the KV exporter at scrape time. pdserve_prefill_queued_prompt_tokens drives the prefill HPA
// (deploy/k8s/prometheus-adapter/values.yaml): keep its name and meaning.
#ifndef PDSERVE_PREFILL_WORKER_PREFILL_METRICS_H_
#define PDSERVE_PREFILL_WORKER_PREFILL_METRICS_H_

#include "common/metrics/metrics_registry.h"
#include "prefill_worker/prefill_context.h"

namespace pdserve::prefill {

// `ctx`'s loop and exporter must outlive every scrape of `registry`.
void RegisterPrefillMetrics(const PrefillContext* ctx, MetricsRegistry* registry);

}  // namespace pdserve::prefill

#endif  // PDSERVE_PREFILL_WORKER_PREFILL_METRICS_H_
