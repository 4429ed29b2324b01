// Engine: continuous batching over one ModelRunner and one KvCache.
//
// Each Step() builds one ragged forward batch: every running sequence
// contributes its next decode token, and the remaining token budget
// (max_batch_tokens, or max_prefill_tokens_while_decoding when some
// sequence decodes) is filled with prefill chunks of sequences still
// reading their prompt, oldest first. New sequences join between steps and
// finished ones leave, so decode never waits for a whole batch to drain.
//
// A sequence's KV blocks (prompt + max_tokens, capped by the context) are
// reserved when it is added, so an admitted sequence can always finish;
// admission fails with RESOURCE_EXHAUSTED instead.
//
// Prefix cache (Options::prefix_cache): a new sequence starts with the
// longest run of cached full blocks matching its prompt attached (shared,
// refcounted) and computes only the rest; every block a sequence fills
// completely is published for later ones. The prompt's last token is
// always computed, because its logits give the first output token.
//
// The engine is continuous batching only; two features live in their own
// units: the sliding-window layers' memory (window_release.h) and the KV
// handoff between workers (engine_handoff.cc: held blocks of prefill
// sequences, Detach for migration).
//
// Not thread-safe: a worker drives its Engine from one engine thread.
#ifndef PDSERVE_COMMON_ENGINE_ENGINE_H_
#define PDSERVE_COMMON_ENGINE_ENGINE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/kv_cache.h"
#include "common/engine/model_runner.h"
#include "common/engine/scheduler.h"
#include "common/engine/sequence.h"
#include "common/engine/speculation.h"
#include "common/engine/step_cost_model.h"
#include "common/engine/suffix_cache.h"
#include "common/engine/window_release.h"
#include "common/request/token_logprobs.h"
#include "common/text/tokenizer.h"

namespace pdserve {

class Engine {
 public:
  // One prefill chunk of a step, as seen by the layer hook.
  struct LayerChunk {
    int64_t seq_id;
    int32_t start_pos;
    int32_t n_tokens;
    const std::vector<int32_t>* blocks;
    bool completes_prompt;
  };
  using LayerHook = std::function<void(int layer, const std::vector<LayerChunk>& chunks)>;

  struct Options {
    int32_t max_batch_tokens = 512;  // tokens per forward step
    int32_t max_running = 64;        // sequences in the batch at once
    // While some sequence decodes, a step prefills at most this many
    // prompt tokens (0: up to max_batch_tokens). A step is as slow as its
    // prefill chunk, and every decoding sequence waits that long for its
    // next token: a smaller chunk bounds their inter-token latency at the
    // cost of more steps for the prompt.
    int32_t max_prefill_tokens_while_decoding = 0;
    // Called after each layer's K/V of a step are in the cache, with the
    // step's prefill chunks (prefill workers stream layers from here).
    LayerHook on_layer_done;
    // Reuse and publish full KV blocks by their hash-chain key.
    bool prefix_cache = true;
    // Drafts verified in the batch (speculation.h); off unless enabled
    // here or asked for by a request.
    SpeculationOptions speculation;
  };

  // Cumulative prefix-cache counters (hit ratio = hit / lookup).
  struct PrefixStats {
    int64_t lookup_tokens = 0;  // prompt tokens of admitted sequences
    int64_t hit_tokens = 0;     // of those, taken from the cache
  };

  Engine(const Tokenizer* tokenizer, ModelRunner* runner, KvCache* cache, Options options);
  ~Engine();

  // Validates and admits a sequence; events arrive from Step() calls.
  absl::StatusOr<int64_t> Add(SequenceOptions options,
                              std::function<void(const TokenEvent&)> on_event);
  // Decode side of a disaggregated request: validates like Add() and
  // reserves the blocks, but the sequence waits for CommitPrefilled().
  absl::StatusOr<int64_t> Reserve(SequenceOptions options,
                                  std::function<void(const TokenEvent&)> on_event);
  // The block table of a live sequence (empty if unknown).
  std::vector<int32_t> BlocksOf(int64_t seq_id) const;
  // Prompt tokens a live sequence took from the prefix cache (0 if unknown).
  int32_t CachedTokensOf(int64_t seq_id) const;
  // The prompt's KV is in the reserved blocks and `first_token` was sampled
  // by the prefill worker: emit it and join the running batch.
  // `first_logprobs` are the prefill worker's log-probabilities of it; the
  // event carries them when the sequence asked for logprobs and they belong
  // to `first_token` (a prefill worker that predates them sends none).
  // A sequence whose window layers received only the prompt's last window
  // never enters the prefix cache.
  absl::Status CommitPrefilled(int64_t seq_id, int32_t first_token,
                               std::optional<TokenLogprobs> first_logprobs);
  // KV handoff (engine_handoff.cc).
  // Prefill side: blocks of ended hold_kv_on_finish sequences (finished,
  // cancelled, or ended by a failed step), now owned by the caller, who
  // returns them with FreeBlocks() after the transfer.
  std::vector<int32_t> TakeHeldBlocks(int64_t seq_id);
  void FreeBlocks(const std::vector<int32_t>& blocks);
  // Ends a sequence now (its callback sees kCancelled) and frees its blocks
  // (a hold_kv_on_finish sequence's are held, as however it ends). Unknown
  // ids are ignored: the sequence may just have finished.
  void Cancel(int64_t seq_id);
  // Cancel, except that the blocks go to the caller (FreeBlocks() once
  // nothing reads them any more) instead of back to the pool: a prefill
  // worker's transport may still be reading them. A hold_kv_on_finish
  // sequence that already ended gives its held blocks (TakeHeldBlocks).
  // Empty for unknown ids.
  std::vector<int32_t> CancelAndTakeBlocks(int64_t seq_id);

  // A running sequence taken out of the engine whole, to continue on
  // another worker (KV migration): its KV blocks (the caller's now: it
  // returns them with FreeBlocks()), how many leading tokens they hold, and
  // the last token, sampled but not yet fed, which the other worker feeds.
  struct Detached {
    std::vector<int32_t> blocks;
    int32_t kv_tokens = 0;  // prompt + generated, but the last
    int32_t last_token = -1;
    int32_t generated = 0;  // first_index included: the request's count
  };
  // Removes a sequence that decodes (prompt done, a token generated, not
  // finished) without any event; FAILED_PRECONDITION for any other.
  absl::StatusOr<Detached> Detach(int64_t seq_id);

  // Back pressure: a decoding sequence whose reader does not keep up sits
  // out of the batch, keeping its blocks (and its place in the output),
  // until resumed. Unknown ids and sequences not yet decoding are ignored.
  void SetPaused(int64_t seq_id, bool paused);
  int32_t num_paused() const;

  // True while some sequence can make progress in Step().
  bool HasWork() const;
  // The runner's verdict on itself (ModelRunner::Healthy).
  absl::Status runner_health() const { return runner_->Healthy(); }
  int32_t num_sequences() const { return static_cast<int32_t>(sequences_.size()); }
  int64_t queued_prompt_tokens() const;
  const KvCache& cache() const { return *cache_; }
  const PrefixStats& prefix_stats() const { return prefix_stats_; }
  const SpeculationStats& speculation_stats() const { return speculation_stats_; }
  // Cumulative logits masks of constrained sequences and their time.
  struct GrammarStats {
    int64_t masks = 0;
    int64_t mask_nanos = 0;
  };
  const GrammarStats& grammar_stats() const { return grammar_stats_; }
  // Sequences the next step takes (decode tokens within max_running, then
  // prefill chunks within the token budget), and all the others: past
  // those limits, or waiting for their KV.
  int32_t num_running() const;
  int32_t num_waiting() const;
  // Runs one forward step over the current batch.
  absl::Status Step();

 private:
  std::vector<ScheduledSlot> Schedule() const;  // scheduler.h
  // Drafts for this step's decoding sequences, within the step's rows.
  void PlanDrafts();
  // The smallest chance of being kept that pays for a verification row
  // in a step of `decoding` sequences (0 until the step cost is known).
  double DraftThreshold(int32_t decoding) const;
  void BuildBatch(ForwardBatch* batch, std::vector<Sequence*>* owners);
  // Samples the rows of a drafted step (`logits`: 1 + draft rows) while
  // they agree with the draft; returns the rows used, whose inputs are now
  // the sequence's tokens.
  int32_t VerifyDraft(Sequence& seq, float* logits);
  // VerifyDraft's outcome at --v=2 (and a refused draft's text at --v=3).
  void LogVerifiedDraft(const Sequence& seq, int32_t kept) const;
  absl::StatusOr<std::unique_ptr<Sequence>> Admit(SequenceOptions opts,
                                                  std::function<void(const TokenEvent&)> cb);
  // The longest run of cached blocks matching the prompt (never all of it),
  // each referenced for the caller, and their keys.
  struct CachedPrefix {
    std::vector<int32_t> blocks;
    std::vector<uint64_t> keys;
  };
  CachedPrefix TakeCachedPrefix(const std::vector<int32_t>& prompt);
  // Publishes the sequence's full blocks that are computed and not yet keyed.
  void PublishFullBlocks(Sequence& seq);
  void RunLayerHook(const ForwardBatch& batch, const std::vector<Sequence*>& owners, int layer);
  void SampleNext(Sequence& seq, absl::Span<float> logits);
  // Structured output: a matcher for `opts.grammar` that has accepted the
  // output so far (the prompt's last first_index tokens).
  static absl::StatusOr<std::unique_ptr<GrammarMatcher>> ReplayGrammar(const SequenceOptions& opts);
  // Sets the logits of the tokens the sequence's grammar forbids to -inf.
  void MaskLogits(Sequence& seq, absl::Span<float> logits);
  // Sampler::Sample rewrites its row (penalties, temperature), but logprobs
  // are the model's own: samples from a copy of `logits` and computes the
  // sequence's logprobs, chosen token included, from the untouched row.
  TokenLogprobs SampleWithLogprobs(Sequence& seq, absl::Span<const float> logits, uint64_t index);
  // Structured output: feeds `token` to the sequence's grammar; false when
  // the answer is over (the grammar terminated, or refused the token).
  bool AdvanceGrammar(Sequence& seq, int32_t token);
  void AcceptToken(Sequence& seq, int32_t token, std::optional<TokenLogprobs> logprobs);
  void Finish(Sequence& seq, FinishReason reason);
  // Gives a finished sequence's output to the suffix cache.
  void RememberOutput(const Sequence& seq);
  void ReapFinished();

  const Tokenizer* tokenizer_;
  ModelRunner* runner_;
  KvCache* cache_;
  const Options options_;
  WindowRelease window_;
  int64_t next_id_ = 1;
  std::map<int64_t, std::unique_ptr<Sequence>> sequences_;  // admission order
  std::map<int64_t, std::vector<int32_t>> held_blocks_;
  std::vector<float> logits_;
  // SampleWithLogprobs: the copy of a row that Sampler::Sample rewrites.
  std::vector<float> sample_scratch_;
  std::vector<uint32_t> grammar_mask_;  // MaskLogits' scratch
  PrefixStats prefix_stats_;
  SpeculationStats speculation_stats_;
  GrammarStats grammar_stats_;
  // Recent outputs to draft from; null when SpeculationOptions keeps none.
  std::unique_ptr<SuffixCache> suffix_cache_;
  // Decode-only steps' times, to price verification rows.
  StepCostModel step_cost_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_ENGINE_H_
