// Sequence: the per-request state one engine keeps — tokens, the KV blocks
// that hold them, how far the forward pass has got, and when to stop.
// Owned and mutated only by the engine thread.
#ifndef PDSERVE_COMMON_ENGINE_SEQUENCE_H_
#define PDSERVE_COMMON_ENGINE_SEQUENCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "common/engine/copy_edits.h"
#include "common/engine/sampler.h"
#include "common/engine/speculation.h"
#include "common/grammar/grammar_matcher.h"
#include "common/request/sampling_params.h"
#include "common/request/token_logprobs.h"

namespace pdserve {

enum class FinishReason { kNone, kLength, kEos, kStop, kCancelled, kContextFull };
std::string_view FinishReasonName(FinishReason r);

// One generated token (or the end of a sequence) as the engine reports it.
struct TokenEvent {
  int64_t seq_id = 0;
  int32_t token = -1;  // -1 when the event only reports a finish
  int32_t index = 0;   // 0 for the first generated token
  FinishReason finish = FinishReason::kNone;
  // The token's log-probabilities, when the sequence asked for them
  // (SamplingParams::logprobs >= 0); empty otherwise, and on a finish-only
  // event. A committed first token has them only if its commit carried them.
  std::optional<TokenLogprobs> logprobs = std::nullopt;
};

struct SequenceOptions {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int32_t max_tokens = 16;
  bool ignore_eos = false;
  // Prefill workers: keep the KV blocks however the sequence ends (its
  // layers may be in flight to a decode worker); they are handed over with
  // Engine::TakeHeldBlocks() and freed after the transfer or its abort.
  bool hold_kv_on_finish = false;
  // Index of the first generated token: non-zero when a request moved from
  // another decode worker continues (the prompt then ends with the tokens
  // generated so far). Only numbering and the sampler's draw depend on it.
  int32_t first_index = 0;
  // The KV CommitPrefilled receives comes from a decode worker that was
  // decoding the sequence (KV migration): its window layers may lack blocks
  // below the sent window, so the blocks are never published.
  bool migrated = false;
  // False: the prefix cache neither serves nor keeps this prompt's blocks,
  // and its statistics do not count it (a worker's start-up warm-up).
  bool use_prefix_cache = true;
  // Structured output: sampling.constraint compiled for this model (the
  // caller compiles it off the engine thread); null = free text.
  std::shared_ptr<const CompiledGrammar> grammar;
};

struct Sequence {
  Sequence(int64_t id, SequenceOptions opts, std::function<void(const TokenEvent&)> cb)
      : id(id), options(std::move(opts)), sampler(options.sampling), on_event(std::move(cb)) {
    tokens = options.prompt;
  }

  int32_t prompt_len() const { return static_cast<int32_t>(options.prompt.size()); }
  int32_t generated() const { return static_cast<int32_t>(tokens.size()) - prompt_len(); }
  // Decode workers: blocks are reserved but the prompt's KV comes from a
  // prefill worker; the sequence is not scheduled until it is committed.
  bool awaiting_kv = false;
  bool prefilling() const { return !awaiting_kv && num_computed < prompt_len(); }
  bool running() const { return !awaiting_kv && num_computed >= prompt_len(); }
  // Back pressure: its reader does not keep up, so it sits out of the
  // batch (its blocks kept) until Engine::SetPaused(id, false).
  bool paused = false;
  // Running and not paused: what a step decodes.
  bool decoding() const { return running() && !paused; }

  const int64_t id;
  const SequenceOptions options;
  const Sampler sampler;
  std::function<void(const TokenEvent&)> on_event;
  std::vector<int32_t> tokens;  // prompt followed by generated tokens
  std::vector<int32_t> blocks;  // KV block table
  int32_t num_computed = 0;     // tokens whose K/V are in the cache
  // Prompt tokens whose K/V came from the prefix cache at admission (whole
  // blocks; never the full prompt, the last token is always computed).
  int32_t cached_tokens = 0;
  // Hash-chain keys of the leading full blocks already looked up or
  // published (block_keys[i] belongs to blocks[i]).
  std::vector<uint64_t> block_keys;
  // False once its KV has holes a later prompt could read (a window layer
  // received only the prompt's last window): never published then.
  bool publishable = true;
  // Leading blocks whose window layers no later token reads, already
  // handed to KvCache::ReleaseWindowLayers (or skipped as shared).
  int32_t window_released_blocks = 0;
  // Speculative decoding (speculation.h): whether this sequence drafts, the
  // length of its next draft (adapted to how much of its drafts it keeps),
  // and, during a step, the draft and the step's input (its last token,
  // then the draft).
  bool speculate = false;
  int32_t draft_len = 0;
  // The chance that a draft token is kept given that the one before it
  // was, a moving average over this sequence's verified positions.
  double keep_rate = 0.8;
  std::vector<int32_t> draft;
  DraftSource draft_source = DraftSource::kNone;
  // Where a prompt-lookup draft was copied from, and the replacements this
  // sequence was seen to make while copying (copy_edits.h).
  CopySource draft_from;
  CopyEdits copy_edits;
  std::vector<int32_t> step_input;
  // Structured output: the grammar's state after every token the sequence
  // has produced (first_index of them came in the prompt and were replayed
  // at admission). Only final tokens are accepted: a draft row's token
  // enters once it is sampled, so a rejected draft leaves nothing to undo.
  std::unique_ptr<GrammarMatcher> grammar;
  FinishReason finish = FinishReason::kNone;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_SEQUENCE_H_
