#include "common/engine/engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status_macros.h"
#include "common/engine/logprobs.h"
#include "common/engine/prompt_lookup.h"
#include "common/request/block_hash.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

// The first token's logprobs as a commit brought them: kept if the sequence
// asked for logprobs and they are for that token. They come from another
// worker and only annotate the output, so a mismatch loses them, not the
// request.
std::optional<TokenLogprobs> CommittedLogprobs(const Sequence& seq, int32_t first_token,
                                               std::optional<TokenLogprobs> logprobs) {
  if (!logprobs.has_value() || seq.options.sampling.logprobs < 0) return std::nullopt;
  if (logprobs->token != first_token) {
    LOG(WARNING) << "sequence " << seq.id << ": dropping first-token logprobs for token "
                 << logprobs->token << ", the commit's token is " << first_token;
    return std::nullopt;
  }
  return logprobs;
}

// Weight of the past in a sequence's keep rate, per verified position.
constexpr double kKeepRateDecay = 0.9;

}  // namespace

std::string_view FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kContextFull:
      return "context_full";
  }
  return "unknown";
}

Engine::Engine(const Tokenizer* tokenizer, ModelRunner* runner, KvCache* cache, Options options)
    : tokenizer_(tokenizer), runner_(runner), cache_(cache), options_(options), window_(cache) {
  const SpeculationOptions& spec = options_.speculation;
  if (spec.suffix_cache_tokens > 0) {
    suffix_cache_ =
        std::make_unique<SuffixCache>(spec.suffix_cache_tokens, spec.min_ngram, spec.max_ngram);
  }
}

Engine::~Engine() {
  for (auto& [id, seq] : sequences_) cache_->allocator().UnrefAll(seq->blocks);
  for (auto& [id, blocks] : held_blocks_) cache_->allocator().UnrefAll(blocks);
}

absl::StatusOr<std::unique_ptr<Sequence>> Engine::Admit(
    SequenceOptions opts, std::function<void(const TokenEvent&)> on_event) {
  const int32_t ctx = runner_->config().context_length;
  if (opts.prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
  for (int32_t t : opts.prompt) {
    if (!tokenizer_->IsValidId(t)) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt token id ", t, " is not in the vocabulary"));
    }
  }
  if (opts.max_tokens < 1) return absl::InvalidArgumentError("max_tokens must be at least 1");
  // Output indices (first_index + generated) stay within int32 and mean
  // something: a continuation's first index is the tokens already made,
  // which are part of its prompt.
  if (opts.first_index < 0 || opts.first_index > ctx) {
    return absl::InvalidArgumentError(
        absl::StrCat("first_index ", opts.first_index, " is outside [0, context ", ctx, "]"));
  }
  RETURN_IF_ERROR(ValidateSamplingParams(opts.sampling));
  std::unique_ptr<GrammarMatcher> grammar;
  if (opts.grammar != nullptr) {
    ASSIGN_OR_RETURN(grammar, ReplayGrammar(opts));
  }
  const int64_t total = static_cast<int64_t>(opts.prompt.size()) + opts.max_tokens;
  if (total > ctx) {
    return absl::OutOfRangeError(absl::StrCat("prompt (", opts.prompt.size(),
                                              " tokens) + max_tokens (", opts.max_tokens,
                                              ") exceeds the context of ", ctx));
  }
  // The last generated token is never fed back, so it needs no KV slot.
  const int32_t block_size = cache_->layout().block_size;
  const int32_t need = BlocksForTokens(total - 1, block_size);
  CachedPrefix prefix = opts.use_prefix_cache ? TakeCachedPrefix(opts.prompt) : CachedPrefix{};
  const int32_t cached = static_cast<int32_t>(prefix.blocks.size());
  absl::StatusOr<std::vector<int32_t>> fresh = cache_->allocator().Allocate(need - cached);
  if (!fresh.ok()) {
    cache_->allocator().UnrefAll(prefix.blocks);
    return fresh.status();
  }
  if (opts.use_prefix_cache) {
    prefix_stats_.lookup_tokens += static_cast<int64_t>(opts.prompt.size());
    prefix_stats_.hit_tokens += static_cast<int64_t>(cached) * block_size;
  }
  auto seq = std::make_unique<Sequence>(next_id_++, std::move(opts), std::move(on_event));
  seq->grammar = std::move(grammar);
  const SpeculationOptions& spec = options_.speculation;
  seq->speculate = seq->options.sampling.speculative.value_or(spec.enabled) && spec.max_draft > 0;
  seq->draft_len = std::max(1, spec.max_draft / 2);
  seq->blocks = std::move(prefix.blocks);
  seq->blocks.insert(seq->blocks.end(), fresh->begin(), fresh->end());
  seq->block_keys = std::move(prefix.keys);
  seq->cached_tokens = cached * block_size;
  seq->num_computed = seq->cached_tokens;
  return seq;
}

Engine::CachedPrefix Engine::TakeCachedPrefix(const std::vector<int32_t>& prompt) {
  CachedPrefix out;
  if (!options_.prefix_cache) return out;
  const int32_t block_size = cache_->layout().block_size;
  // Leave at least the last prompt token to compute: its logits are needed.
  const size_t max_blocks = (prompt.size() - 1) / block_size;
  uint64_t parent = kRootBlockKey;
  for (size_t i = 0; i < max_blocks; ++i) {
    const auto tokens = absl::MakeConstSpan(&prompt[i * block_size], block_size);
    const uint64_t key = ChainBlockKey(parent, tokens);
    const int32_t block = cache_->allocator().FindCached(key, tokens);
    if (block < 0) break;
    out.blocks.push_back(block);
    out.keys.push_back(key);
    parent = key;
  }
  // The prompt's first computed token reads the window layers from
  // WindowRelease::FirstRead on: a match is usable only where none of those blocks
  // gave its window layers back.
  while (!out.blocks.empty() && !window_.Intact(out.blocks)) {
    out.blocks.pop_back();
    out.keys.pop_back();
  }
  for (int32_t block : out.blocks) cache_->allocator().Ref(block);
  return out;
}

void Engine::PublishFullBlocks(Sequence& seq) {
  if (!options_.prefix_cache || !seq.options.use_prefix_cache || !seq.publishable) return;
  const int32_t block_size = cache_->layout().block_size;
  const size_t full = static_cast<size_t>(seq.num_computed / block_size);
  while (seq.block_keys.size() < full) {
    const size_t i = seq.block_keys.size();
    const uint64_t parent = i == 0 ? kRootBlockKey : seq.block_keys.back();
    const auto tokens = absl::MakeConstSpan(&seq.tokens[i * block_size], block_size);
    const uint64_t key = ChainBlockKey(parent, tokens);
    cache_->allocator().Publish(seq.blocks[i], key, tokens);
    seq.block_keys.push_back(key);
  }
}

absl::StatusOr<int64_t> Engine::Add(SequenceOptions opts,
                                    std::function<void(const TokenEvent&)> on_event) {
  ASSIGN_OR_RETURN(std::unique_ptr<Sequence> seq, Admit(std::move(opts), std::move(on_event)));
  const int64_t id = seq->id;
  sequences_.emplace(id, std::move(seq));
  return id;
}

absl::StatusOr<int64_t> Engine::Reserve(SequenceOptions opts,
                                        std::function<void(const TokenEvent&)> on_event) {
  ASSIGN_OR_RETURN(std::unique_ptr<Sequence> seq, Admit(std::move(opts), std::move(on_event)));
  seq->awaiting_kv = true;
  const int64_t id = seq->id;
  sequences_.emplace(id, std::move(seq));
  return id;
}

std::vector<int32_t> Engine::BlocksOf(int64_t seq_id) const {
  auto it = sequences_.find(seq_id);
  return it == sequences_.end() ? std::vector<int32_t>() : it->second->blocks;
}

int32_t Engine::CachedTokensOf(int64_t seq_id) const {
  auto it = sequences_.find(seq_id);
  return it == sequences_.end() ? 0 : it->second->cached_tokens;
}

absl::Status Engine::CommitPrefilled(int64_t seq_id, int32_t first_token,
                                     std::optional<TokenLogprobs> first_logprobs) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end() || !it->second->awaiting_kv) {
    return absl::NotFoundError(absl::StrCat("no sequence ", seq_id, " is waiting for KV"));
  }
  Sequence& seq = *it->second;
  if (!tokenizer_->IsValidId(first_token)) {
    Finish(seq, FinishReason::kCancelled);
    ReapFinished();
    return absl::InvalidArgumentError(absl::StrCat("first token ", first_token, " is invalid"));
  }
  seq.awaiting_kv = false;
  seq.num_computed = seq.prompt_len();
  if (window_.HasHoles(seq) || (seq.options.migrated && window_.active())) {
    // Its window layers hold only the prompt's last window: a later prompt
    // that shares a shorter prefix would read the positions not sent. A
    // migrated stream's may hold less still: its source had already given
    // back window memory its next tokens would not read.
    seq.publishable = false;
  }
  PublishFullBlocks(seq);
  window_.Release(seq);
  AcceptToken(seq, first_token, CommittedLogprobs(seq, first_token, std::move(first_logprobs)));
  ReapFinished();
  return absl::OkStatus();
}

bool Engine::HasWork() const {
  for (const auto& [id, seq] : sequences_) {
    if (!seq->awaiting_kv && !seq->paused) return true;
  }
  return false;
}

void Engine::SetPaused(int64_t seq_id, bool paused) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end() || !it->second->running()) return;
  it->second->paused = paused;
}

int32_t Engine::num_paused() const {
  int32_t n = 0;
  for (const auto& [id, seq] : sequences_) n += seq->paused ? 1 : 0;
  return n;
}

int64_t Engine::queued_prompt_tokens() const {
  int64_t n = 0;
  for (const auto& [id, seq] : sequences_) {
    if (seq->prefilling()) n += seq->prompt_len() - seq->num_computed;
  }
  return n;
}

void Engine::Cancel(int64_t seq_id) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return;
  Finish(*it->second, FinishReason::kCancelled);
  ReapFinished();
}

// The batch's members are what the next step takes, so "running" matches
// what actually runs: a sequence past max_running (or the token budget)
// waits, even if its prompt is done.
int32_t Engine::num_running() const { return static_cast<int32_t>(Schedule().size()); }

int32_t Engine::num_waiting() const { return num_sequences() - num_running(); }

std::vector<ScheduledSlot> Engine::Schedule() const {
  return ScheduleStep(sequences_, {options_.max_batch_tokens, options_.max_running,
                                   options_.max_prefill_tokens_while_decoding});
}

double Engine::DraftThreshold(int32_t decoding) const {
  if (!options_.speculation.price_rows || !step_cost_.ready() || decoding <= 0) return 0;
  return RowPriceThreshold(step_cost_.per_row(), step_cost_.StepSeconds(decoding), decoding);
}

void Engine::PlanDrafts() {
  const SpeculationOptions& spec = options_.speculation;
  std::vector<Sequence*> drafted;
  int32_t decoding = 0;
  for (const auto& [id, seq] : sequences_) decoding += seq->decoding() ? 1 : 0;
  decoding = std::min(decoding, options_.max_running);  // the scheduler's cut
  const double threshold = DraftThreshold(decoding);
  int32_t spare = std::min(spec.max_step_rows, options_.max_batch_tokens) - decoding;
  int32_t seen = 0;
  for (auto& [id, seq] : sequences_) {
    seq->draft.clear();
    // A full batch has no rows to spare: no history is searched then.
    if (!seq->decoding() || seen == decoding || spare <= 0) continue;
    ++seen;
    // The last row's token may be the max_tokens-th, never one past it:
    // this also keeps every row inside the blocks reserved at admission.
    const int32_t room = seq->options.max_tokens - seq->generated() - 1;
    int32_t len = std::min(seq->draft_len, room);
    if (threshold > 0) len = WorthwhileDraftLength(seq->keep_rate, threshold, len);
    if (!seq->speculate || len <= 0) continue;
    seq->copy_edits.Confirm(seq->tokens);
    LookupDraft found =
        PromptLookupDraft(seq->tokens, spec.min_ngram, spec.max_match, len, &seq->copy_edits);
    seq->draft = std::move(found.tokens);
    seq->draft_from = std::move(found.from);
    seq->draft_source = DraftSource::kPromptLookup;
    if (seq->draft.empty() && suffix_cache_ != nullptr) {
      seq->draft = suffix_cache_->Draft(seq->tokens, len);
      seq->draft_source = DraftSource::kSuffixCache;
    }
    if (!seq->draft.empty()) drafted.push_back(seq.get());
  }
  // Rows go first to the sequences that keep most of their drafts,
  // admission order among equals.
  std::stable_sort(drafted.begin(), drafted.end(), [](const Sequence* a, const Sequence* b) {
    return a->keep_rate > b->keep_rate;
  });
  for (Sequence* seq : drafted) {
    const int32_t take = std::clamp(spare, 0, static_cast<int32_t>(seq->draft.size()));
    seq->draft.resize(static_cast<size_t>(take));
    spare -= take;
  }
}

void Engine::BuildBatch(ForwardBatch* batch, std::vector<Sequence*>* owners) {
  for (const ScheduledSlot& slot : Schedule()) {
    Sequence& seq = *slot.seq;
    const int32_t pos = seq.num_computed;
    owners->push_back(&seq);
    if (seq.running() && !seq.draft.empty()) {
      seq.draft.resize(static_cast<size_t>(slot.n_tokens - 1));
      seq.step_input.assign(1, seq.tokens[pos]);
      seq.step_input.insert(seq.step_input.end(), seq.draft.begin(), seq.draft.end());
      batch->chunks.push_back(
          {seq.step_input, pos, seq.blocks, true, static_cast<int32_t>(seq.step_input.size())});
      continue;
    }
    const bool last = pos + slot.n_tokens >= seq.prompt_len();  // a decode token always is
    batch->chunks.push_back(
        {absl::MakeConstSpan(&seq.tokens[pos], slot.n_tokens), pos, seq.blocks, last});
  }
}

// For tuning drafting on real workloads: each verified draft at --v=2 and,
// at --v=3, a refused one's text (the context copied on, the draft up to the
// refused token, and what the model wrote there).
void Engine::LogVerifiedDraft(const Sequence& seq, int32_t kept) const {
  const auto k = static_cast<int32_t>(seq.draft.size());
  VLOG(2) << "sequence " << seq.id << ": kept " << kept << " of " << k << " drafted ("
          << DraftSourceName(seq.draft_source) << ", anchor " << seq.draft_from.match << ")";
  // kept < k also where the sequence finished on a kept token: not a refusal.
  if (!VLOG_IS_ON(3) || kept == k || seq.tokens.back() == seq.draft[kept]) return;
  const auto refused = seq.tokens.end() - 1;  // the model's token where the draft's was refused
  const auto context = refused - std::min<int64_t>(refused - seq.tokens.begin(), kept + 12);
  const auto draft = absl::MakeConstSpan(seq.draft).first(static_cast<size_t>(kept) + 1);
  VLOG(3) << "sequence " << seq.id << ": after \""
          << absl::CEscape(tokenizer_->Decode(absl::MakeConstSpan(&*context, refused - context)))
          << "\" drafted \"" << absl::CEscape(tokenizer_->Decode(draft)) << "\", model wrote \""
          << absl::CEscape(tokenizer_->Decode(absl::MakeConstSpan(&*refused, 1))) << "\"";
}

int32_t Engine::VerifyDraft(Sequence& seq, float* logits) {
  const int32_t vocab = runner_->config().n_vocab;
  const auto k = static_cast<int32_t>(seq.draft.size());
  const auto at = static_cast<int64_t>(seq.tokens.size());  // where the draft's first token lands
  int32_t kept = 0;
  int32_t rows = 0;
  while (rows <= k) {
    SampleNext(seq, absl::MakeSpan(logits + static_cast<int64_t>(rows) * vocab, vocab));
    const bool match = rows < k && seq.tokens.back() == seq.draft[rows];
    if (rows < k) seq.keep_rate = kKeepRateDecay * seq.keep_rate + (1 - kKeepRateDecay) * match;
    ++rows;
    if (!match || seq.finish != FinishReason::kNone) break;
    ++kept;
  }
  SpeculationStats::PerSource& source =
      speculation_stats_.source[static_cast<int>(seq.draft_source)];
  source.drafted += k;
  source.accepted += kept;
  LogVerifiedDraft(seq, kept);
  ++speculation_stats_.steps;
  speculation_stats_.tokens += rows;
  if (seq.draft_source == DraftSource::kPromptLookup) {
    seq.copy_edits.OnVerified(seq.tokens, at, seq.draft_from, seq.draft, kept);
  }
  // A fully kept draft earns a longer one; a rejected one shrinks to what
  // was kept plus one, so a sequence whose drafts keep failing spends one
  // extra row per step at most.
  if (kept < k) {
    seq.draft_len = kept + 1;
  } else if (k == seq.draft_len) {
    seq.draft_len = std::min(options_.speculation.max_draft, 2 * seq.draft_len);
  }
  seq.draft.clear();
  seq.step_input.clear();
  return rows;
}

absl::Status Engine::Step() {
  ForwardBatch batch;
  std::vector<Sequence*> owners;  // one per chunk
  PlanDrafts();
  BuildBatch(&batch, &owners);
  if (batch.chunks.empty()) return absl::OkStatus();
  if (options_.on_layer_done) {
    batch.on_layer_done = [&](int layer) { RunLayerHook(batch, owners, layer); };
  }
  // Decode-only steps price verification rows (step_cost_model.h).
  const bool decode_only =
      std::all_of(owners.begin(), owners.end(), [](const Sequence* s) { return s->running(); });
  const absl::Time start = absl::Now();
  if (absl::Status s = runner_->Forward(batch, *cache_, &logits_); !s.ok()) {
    // Admission validated these sequences, so this is an engine bug or a
    // lost device; end them rather than retrying the same batch forever.
    for (Sequence* seq : owners) Finish(*seq, FinishReason::kCancelled);
    ReapFinished();
    return s;
  }
  const int32_t vocab = runner_->config().n_vocab;
  size_t row = 0;
  for (size_t c = 0; c < batch.chunks.size(); ++c) {
    Sequence& seq = *owners[c];
    const SequenceChunk& chunk = batch.chunks[c];
    if (!seq.draft.empty()) {
      // Rejected rows' K/V stay past num_computed: never read, and
      // overwritten by the next step.
      seq.num_computed += VerifyDraft(seq, &logits_[row * vocab]);
      row += static_cast<size_t>(chunk.logit_rows);
    } else {
      seq.num_computed += static_cast<int32_t>(chunk.tokens.size());
      if (chunk.want_logits) SampleNext(seq, absl::MakeSpan(&logits_[row++ * vocab], vocab));
    }
    PublishFullBlocks(seq);
    window_.Release(seq);
  }
  if (decode_only) {
    int32_t rows = 0;
    for (const SequenceChunk& chunk : batch.chunks)
      rows += static_cast<int32_t>(chunk.tokens.size());
    step_cost_.Observe(rows, absl::ToDoubleSeconds(absl::Now() - start));
  }
  ReapFinished();
  return absl::OkStatus();
}

void Engine::RunLayerHook(const ForwardBatch& batch, const std::vector<Sequence*>& owners,
                          int layer) {
  std::vector<LayerChunk> chunks;
  for (size_t c = 0; c < batch.chunks.size(); ++c) {
    const SequenceChunk& ch = batch.chunks[c];
    const Sequence& seq = *owners[c];
    if (ch.start_pos >= seq.prompt_len()) continue;  // a decode token
    const int32_t n = static_cast<int32_t>(ch.tokens.size());
    chunks.push_back({seq.id, ch.start_pos, n, &seq.blocks, ch.start_pos + n == seq.prompt_len()});
  }
  if (!chunks.empty()) options_.on_layer_done(layer, chunks);
}

absl::StatusOr<std::unique_ptr<GrammarMatcher>> Engine::ReplayGrammar(const SequenceOptions& opts) {
  auto matcher = std::make_unique<GrammarMatcher>(opts.grammar);
  const size_t from = opts.prompt.size() - static_cast<size_t>(opts.first_index);
  for (size_t i = from; i < opts.prompt.size(); ++i) {
    if (!matcher->Accept(opts.prompt[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output token ", i - from, " (id ", opts.prompt[i], ") of the request so far breaks its ",
          GrammarKindName(opts.grammar->constraint().kind), " constraint"));
    }
  }
  return matcher;
}

void Engine::MaskLogits(Sequence& seq, absl::Span<float> logits) {
  // Timed for the metrics: a mask costs microseconds, the clock ~20 ns.
  const int64_t start = absl::GetCurrentTimeNanos();
  if (seq.grammar->FillMask(&grammar_mask_)) {
    ApplyMask(grammar_mask_, logits.data(), static_cast<int>(logits.size()));
  }
  ++grammar_stats_.masks;
  grammar_stats_.mask_nanos += absl::GetCurrentTimeNanos() - start;
}

void Engine::SampleNext(Sequence& seq, absl::Span<float> logits) {
  const uint64_t index = static_cast<uint64_t>(seq.options.first_index + seq.generated());
  if (seq.options.sampling.logprobs < 0) {  // the common case pays nothing
    if (seq.grammar != nullptr) MaskLogits(seq, logits);
    AcceptToken(seq, seq.sampler.Sample(logits, seq.tokens, index), std::nullopt);
    return;
  }
  TokenLogprobs logprobs = SampleWithLogprobs(seq, logits, index);
  const int32_t token = logprobs.token;
  AcceptToken(seq, token, std::move(logprobs));
}

TokenLogprobs Engine::SampleWithLogprobs(Sequence& seq, absl::Span<const float> logits,
                                         uint64_t index) {
  sample_scratch_.assign(logits.begin(), logits.end());
  if (seq.grammar != nullptr) MaskLogits(seq, absl::MakeSpan(sample_scratch_));
  const int32_t token = seq.sampler.Sample(absl::MakeSpan(sample_scratch_), seq.tokens, index);
  return ComputeTokenLogprobs(logits, token, seq.options.sampling.logprobs);
}

void Engine::AcceptToken(Sequence& seq, int32_t token, std::optional<TokenLogprobs> logprobs) {
  const int32_t index = seq.options.first_index + seq.generated();
  seq.tokens.push_back(token);
  FinishReason reason = FinishReason::kNone;
  // A grammar ends the answer where it is complete (its stop token),
  // ignore_eos or not; a token it refuses (a first token sampled without
  // the constraint) ends it too, loudly.
  const bool grammar_done = seq.grammar != nullptr && !AdvanceGrammar(seq, token);
  if (grammar_done || (!seq.options.ignore_eos && tokenizer_->IsEog(token))) {
    reason = FinishReason::kEos;
  } else if (seq.generated() >= seq.options.max_tokens) {
    reason = FinishReason::kLength;
  }
  seq.on_event({.seq_id = seq.id,
                .token = token,
                .index = index,
                .finish = reason,
                .logprobs = std::move(logprobs)});
  if (reason != FinishReason::kNone) seq.finish = reason;
}

bool Engine::AdvanceGrammar(Sequence& seq, int32_t token) {
  if (!seq.grammar->Accept(token)) {
    LOG(ERROR) << "sequence " << seq.id << ": token " << token << " breaks its "
               << GrammarKindName(seq.grammar->grammar().constraint().kind)
               << " constraint; ending it";
    return false;
  }
  return !seq.grammar->IsTerminated();
}

// A prefill worker's sequences end after one token: nothing to learn.
void Engine::RememberOutput(const Sequence& seq) {
  if (suffix_cache_ == nullptr || seq.options.hold_kv_on_finish || seq.generated() < 2) return;
  const int32_t context = std::min(seq.prompt_len(), options_.speculation.max_ngram);
  suffix_cache_->Add(absl::MakeConstSpan(seq.tokens).subspan(seq.prompt_len() - context), context);
}

void Engine::Finish(Sequence& seq, FinishReason reason) {
  if (seq.finish != FinishReason::kNone) return;
  seq.finish = reason;
  seq.on_event({seq.id, -1, seq.options.first_index + seq.generated(), reason});
}

void Engine::ReapFinished() {
  for (auto it = sequences_.begin(); it != sequences_.end();) {
    if (it->second->finish == FinishReason::kNone) {
      ++it;
      continue;
    }
    Sequence& seq = *it->second;
    RememberOutput(seq);
    if (seq.options.hold_kv_on_finish) {
      held_blocks_[seq.id] = std::move(seq.blocks);
    } else {
      cache_->allocator().UnrefAll(seq.blocks);
    }
    it = sequences_.erase(it);
  }
}

}  // namespace pdserve
