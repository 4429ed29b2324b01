#include "decode_worker/decode_metrics.h"

namespace pdserve::decode {
namespace {

// Drafted and kept tokens per draft source, their ratio, and the tokens a
// drafted sequence-step produced on average (1 = speculation saved nothing).
void RegisterSpeculationMetrics(const EngineLoop* loop, MetricsRegistry* registry) {
  for (int s = 1; s < kNumDraftSources; ++s) {
    const MetricLabels labels = {{"source", std::string(DraftSourceName(DraftSource{s}))}};
    auto counts = [loop, s] { return loop->load().speculation.source[s]; };
    registry->AddCallbackCounter(
        "pdserve_decode_spec_draft_tokens_total", "Draft tokens verified by the model.",
        [counts] { return static_cast<double>(counts().drafted); }, labels);
    registry->AddCallbackCounter(
        "pdserve_decode_spec_accepted_tokens_total", "Draft tokens kept (equal to the output).",
        [counts] { return static_cast<double>(counts().accepted); }, labels);
    registry->AddCallbackGauge(
        "pdserve_decode_spec_acceptance_ratio", "Kept / verified draft tokens since start.",
        [counts] {
          const SpeculationStats::PerSource c = counts();
          return c.drafted > 0 ? static_cast<double>(c.accepted) / c.drafted : 0.0;
        },
        labels);
  }
  registry->AddCallbackCounter(
      "pdserve_decode_spec_steps_total", "Sequence-steps that verified a draft.",
      [loop] { return static_cast<double>(loop->load().speculation.steps); });
  registry->AddCallbackGauge(
      "pdserve_decode_spec_tokens_per_step",
      "Tokens a drafted sequence-step produced, on average since start (1 = no gain).", [loop] {
        const SpeculationStats s = loop->load().speculation;
        return s.steps > 0 ? static_cast<double>(s.tokens) / s.steps : 0.0;
      });
}

// Structured output: logits masks and the time they took, on this tier
// (the prefill tier masks only first tokens).
void RegisterGrammarMetrics(const EngineLoop* loop, MetricsRegistry* registry) {
  registry->AddCallbackCounter(
      "pdserve_decode_grammar_masks_total",
      "Logits masks applied to constrained sequences (one per sampled token).",
      [loop] { return static_cast<double>(loop->load().grammar.masks); });
  registry->AddCallbackCounter(
      "pdserve_decode_grammar_mask_seconds_total",
      "Time spent computing and applying those masks (divide by the count for the mean).",
      [loop] { return static_cast<double>(loop->load().grammar.mask_nanos) / 1e9; });
}

}  // namespace

void RegisterDecodeMetrics(const DecodeContext* ctx, MetricsRegistry* registry) {
  const EngineLoop* loop = ctx->loop;
  registry->AddCallbackGauge("pdserve_decode_kv_blocks_total", "KV cache blocks in the pool.",
                             [loop] { return loop->load().kv_blocks_total; });
  registry->AddCallbackGauge(
      "pdserve_decode_kv_blocks_free",
      "KV cache blocks an admission can take (empty, or cached and unreferenced).",
      [loop] { return loop->load().kv_blocks_free; });
  registry->AddCallbackGauge(
      "pdserve_decode_kv_blocks_cached",
      "Free KV blocks that still hold a cached prefix (reclaimable, evicted LRU first).",
      [loop] { return loop->load().kv_blocks_cached; });
  registry->AddCallbackGauge(
      "pdserve_decode_kv_blocks_utilization",
      "Share of KV blocks in use or reserved, 0..1 (the decode HPA's signal).", [loop] {
        const EngineLoad l = loop->load();
        if (l.kv_blocks_total <= 0) return 0.0;
        return static_cast<double>(l.kv_blocks_total - l.kv_blocks_free) / l.kv_blocks_total;
      });
  registry->AddCallbackGauge("pdserve_decode_running_sequences", "Sequences in the running batch.",
                             [loop] { return loop->load().running; });
  registry->AddCallbackGauge("pdserve_decode_waiting_sequences",
                             "Sequences admitted but waiting for a batch slot.",
                             [loop] { return loop->load().waiting; });
  const KvReceiver* receiver = ctx->receiver;
  registry->AddCallbackGauge("pdserve_decode_pending_kv_transfers",
                             "Reservations waiting for their KV from a prefill worker.",
                             [receiver] { return static_cast<double>(receiver->num_pending()); });
  registry->AddCallbackCounter(
      "pdserve_decode_prefix_cache_lookup_tokens_total",
      "Prompt tokens of admitted requests looked up in the prefix cache.",
      [loop] { return static_cast<double>(loop->load().prefix_lookup_tokens); });
  registry->AddCallbackCounter(
      "pdserve_decode_prefix_cache_hit_tokens_total",
      "Prompt tokens found in the prefix cache (not received from a prefill worker).",
      [loop] { return static_cast<double>(loop->load().prefix_hit_tokens); });
  RegisterSpeculationMetrics(loop, registry);
  RegisterGrammarMetrics(loop, registry);
  registry->AddCallbackGauge(
      "pdserve_decode_paused_sequences",
      "Sequences out of the batch because their stream's reader lags (back pressure); they "
      "keep their KV blocks.",
      [loop] { return static_cast<double>(loop->load().paused); });
  registry->AddCallbackCounter(
      "pdserve_decode_kv_received_bytes_total",
      "KV payload bytes of committed transfers from prefill workers.",
      [ctx] { return static_cast<double>(ctx->kv_bytes_received.load()); });
  registry->AddCallbackCounter(
      "pdserve_decode_migrations_total",
      "Streams this worker handed to another decode worker with their KV (drain, rebalancing).",
      [ctx] { return static_cast<double>(ctx->migrations_out.load()); }, {{"outcome", "moved"}});
  registry->AddCallbackCounter(
      "pdserve_decode_migrations_total",
      "Streams this worker handed to another decode worker with their KV (drain, rebalancing).",
      [ctx] { return static_cast<double>(ctx->migrations_out_failed.load()); },
      {{"outcome", "failed"}});
}

}  // namespace pdserve::decode
