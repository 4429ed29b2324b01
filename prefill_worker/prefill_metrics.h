// The prefill worker's Prometheus gauges, read from the engine loop at
// scrape time. pdserve_prefill_queued_prompt_tokens drives the prefill HPA
// (deploy/k8s/prometheus-adapter/values.yaml): keep its name and meaning.
#ifndef PDSERVE_PREFILL_WORKER_PREFILL_METRICS_H_
#define PDSERVE_PREFILL_WORKER_PREFILL_METRICS_H_

#include "common/engine_loop.h"
#include "common/metrics/metrics_registry.h"

namespace pdserve {

// `loop` must outlive every scrape of `registry`.
void RegisterPrefillMetrics(const EngineLoop* loop, MetricsRegistry* registry);

}  // namespace pdserve

#endif  // PDSERVE_PREFILL_WORKER_PREFILL_METRICS_H_
