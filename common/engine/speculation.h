// Speculative decoding on the engine: settings, draft sources and counters.
//
// A running sequence may bring a draft of k tokens guessed from text it has
// already seen or that earlier requests on the worker wrote (no draft
// model: see prompt_lookup.h and suffix_cache.h). The step feeds the
// sequence's last token and the draft (k + 1 rows) and the engine samples
// every row in order with the sequence's own sampler, keeping the draft's
// tokens for as long as they equal what was sampled. Because the sampler's
// draw is a pure function of (seed, token index), the kept tokens are
// exactly those the sequence would have produced one step at a time, greedy
// or sampled: speculation changes the speed, never the output. (For a
// deterministic draft this is the standard speculative-sampling rule, which
// accepts a drafted token t with probability p(t), with the randomness
// coupled to the token's index.) Rejected rows' KV stays behind the
// sequence's computed length, where nothing reads it and the next step
// overwrites it.
#ifndef PDSERVE_COMMON_ENGINE_SPECULATION_H_
#define PDSERVE_COMMON_ENGINE_SPECULATION_H_

#include <cstdint>
#include <string_view>

namespace pdserve {

enum class DraftSource { kNone, kPromptLookup, kSuffixCache };
inline constexpr int kNumDraftSources = 3;
std::string_view DraftSourceName(DraftSource s);

struct SpeculationOptions {
  // The worker's default; a request may turn it on or off for itself
  // (SamplingParams::speculative).
  bool enabled = false;
  // The longest draft of one sequence in one step.
  int32_t max_draft = 16;
  // The shortest tail of the sequence a draft is copied on, and the longest
  // and shortest contexts the suffix cache indexes.
  int32_t max_ngram = 4;
  int32_t min_ngram = 2;
  // Prompt lookup compares up to this many tokens of the tail to choose
  // among the earlier places it occurred (the longest match wins): enough
  // to tell apart functions or paragraphs that start alike.
  int32_t max_match = 32;
  // Outputs of recent requests kept for drafting (suffix_cache.h), in
  // tokens; 0 = none. Asked only where prompt lookup finds nothing.
  int64_t suffix_cache_tokens = 32768;
  // Decode rows (one per decoding sequence plus their drafts) a step may
  // hold at most, whatever price_rows decides: a bound on the step's
  // latency for everyone in it.
  int32_t max_step_rows = 16;
  // Price verification rows with the measured cost of a step
  // (step_cost_model.h): a sequence drafts position j only while the chance
  // that positions 1..j are all kept exceeds what a row costs relative to
  // a token of plain decode, so drafts shrink as the batch grows and stop
  // where rows are dear. False: only the limits above (tests, for
  // decisions that do not depend on timing).
  bool price_rows = true;
};

// The chance of being kept that a draft token must exceed to pay for its
// verification row: a row costs `per_row_seconds`, a plain step of
// `decoding` sequences `step_seconds`, i.e. that over `decoding` per token.
// In [0, 1]; 1 where rows cost at least a token.
double RowPriceThreshold(double per_row_seconds, double step_seconds, int32_t decoding);
// The longest draft (at most `max_len`) whose every position j is worth its
// row: positions 1..j are all kept with chance keep_rate^j, which must
// exceed `threshold`.
int32_t WorthwhileDraftLength(double keep_rate, double threshold, int32_t max_len);

// Cumulative counters of one engine.
struct SpeculationStats {
  struct PerSource {
    int64_t drafted = 0;   // draft tokens fed to the model
    int64_t accepted = 0;  // of those, kept
  };
  PerSource source[kNumDraftSources];
  int64_t steps = 0;   // sequence-steps that verified a draft
  int64_t tokens = 0;  // tokens those sequence-steps produced
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_SPECULATION_H_
