#include "prefill_worker/prefill_metrics.h"

namespace pdserve {

void RegisterPrefillMetrics(const EngineLoop* loop, MetricsRegistry* registry) {
  registry->AddCallbackGauge(
      "pdserve_prefill_queued_prompt_tokens",
      "Prompt tokens admitted but not yet prefilled (the prefill HPA's signal).",
      [loop] { return static_cast<double>(loop->load().queued_prompt_tokens); });
  registry->AddCallbackGauge("pdserve_prefill_kv_blocks_free",
                             "KV cache blocks neither reserved nor in use.",
                             [loop] { return loop->load().kv_blocks_free; });
  registry->AddCallbackGauge("pdserve_prefill_running_sequences",
                             "Prompts in the running batch.",
                             [loop] { return loop->load().running; });
}

}  // namespace pdserve
