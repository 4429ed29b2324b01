#include "prefill_worker/prefill_metrics.h"

namespace pdserve::prefill {

void RegisterPrefillMetrics(const PrefillContext* ctx, MetricsRegistry* registry) {
  const EngineLoop* loop = ctx->loop;
  registry->AddCallbackGauge(
      "pdserve_prefill_queued_prompt_tokens",
      "Prompt tokens admitted but not yet prefilled (the prefill HPA's signal).",
      [loop] { return static_cast<double>(loop->load().queued_prompt_tokens); });
  registry->AddCallbackGauge("pdserve_prefill_kv_blocks_total", "KV cache blocks in the pool.",
                             [loop] { return loop->load().kv_blocks_total; });
  registry->AddCallbackGauge(
      "pdserve_prefill_kv_blocks_free",
      "KV cache blocks an admission can take (empty, or cached and unreferenced).",
      [loop] { return loop->load().kv_blocks_free; });
  registry->AddCallbackGauge(
      "pdserve_prefill_kv_blocks_cached",
      "Free KV blocks that still hold a cached prefix (reclaimable, evicted LRU first).",
      [loop] { return loop->load().kv_blocks_cached; });
  registry->AddCallbackGauge("pdserve_prefill_running_sequences", "Prompts in the running batch.",
                             [loop] { return loop->load().running; });
  registry->AddCallbackGauge("pdserve_prefill_waiting_sequences",
                             "Prompts admitted but waiting for a batch slot.",
                             [loop] { return loop->load().waiting; });
  registry->AddCallbackCounter(
      "pdserve_prefill_prefix_cache_lookup_tokens_total",
      "Prompt tokens of admitted prompts looked up in the prefix cache.",
      [loop] { return static_cast<double>(loop->load().prefix_lookup_tokens); });
  registry->AddCallbackCounter("pdserve_prefill_prefix_cache_hit_tokens_total",
                               "Prompt tokens found in the prefix cache (not computed).", [loop] {
                                 return static_cast<double>(loop->load().prefix_hit_tokens);
                               });
  registry->AddCallbackGauge("pdserve_prefill_tokens_per_second",
                             "Measured prefill rate (moving average over steps), 0 until measured.",
                             [loop] { return loop->load().prefill_tokens_per_s; });
  const PrefillAdmission* admission = &ctx->admission;
  registry->AddCallbackCounter(
      "pdserve_prefill_refused_total",
      "Prompts refused because the queue ahead would not start them before their deadline.",
      [admission] { return static_cast<double>(admission->refused()); });
  const KvExporter* exporter = ctx->exporter;
  registry->AddCallbackCounter("pdserve_prefill_kv_sent_bytes_total",
                               "KV payload bytes queued to decode workers.",
                               [exporter] { return static_cast<double>(exporter->bytes_sent()); });
}

}  // namespace pdserve::prefill
