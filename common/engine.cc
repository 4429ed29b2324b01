#include "common/engine.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pdserve {

std::string_view FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kLength: return "length";
    case FinishReason::kEos: return "eos";
    case FinishReason::kStop: return "stop";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kContextFull: return "context_full";
  }
  return "unknown";
}

Engine::Engine(const Tokenizer* tokenizer, ModelRunner* runner, KvCache* cache, Options options)
    : tokenizer_(tokenizer), runner_(runner), cache_(cache), options_(options) {}

Engine::~Engine() {
  for (auto& [id, seq] : sequences_) cache_->allocator().UnrefAll(seq->blocks);
}

absl::StatusOr<int64_t> Engine::Add(SequenceOptions opts,
                                    std::function<void(const TokenEvent&)> on_event) {
  const int32_t ctx = runner_->config().context_length;
  if (opts.prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
  for (int32_t t : opts.prompt) {
    if (!tokenizer_->IsValidId(t)) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token id ", t, " is not in the vocabulary"));
    }
  }
  if (opts.max_tokens < 1) return absl::InvalidArgumentError("max_tokens must be at least 1");
  RETURN_IF_ERROR(ValidateSamplingParams(opts.sampling));
  const int64_t total = static_cast<int64_t>(opts.prompt.size()) + opts.max_tokens;
  if (total > ctx) {
    return absl::OutOfRangeError(absl::StrCat("prompt (", opts.prompt.size(), " tokens) + max_tokens (",
                                              opts.max_tokens, ") exceeds the context of ", ctx));
  }
  // The last generated token is never fed back, so it needs no KV slot.
  const int32_t need = BlocksForTokens(total - 1, cache_->layout().block_size);
  ASSIGN_OR_RETURN(std::vector<int32_t> blocks, cache_->allocator().Allocate(need));
  const int64_t id = next_id_++;
  auto seq = std::make_unique<Sequence>(id, std::move(opts), std::move(on_event));
  seq->blocks = std::move(blocks);
  sequences_.emplace(id, std::move(seq));
  return id;
}

void Engine::Cancel(int64_t seq_id) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return;
  Finish(*it->second, FinishReason::kCancelled);
  ReapFinished();
}

int32_t Engine::num_running() const {
  int32_t n = 0;
  for (const auto& [id, seq] : sequences_) n += seq->prefilling() ? 0 : 1;
  return n;
}

int32_t Engine::num_waiting() const {
  return static_cast<int32_t>(sequences_.size()) - num_running();
}

// Decode tokens first (they are latency-critical and cost one token each),
// then prefill chunks in admission order until the token budget is spent.
void Engine::BuildBatch(ForwardBatch* batch, std::vector<Sequence*>* owners) {
  int32_t budget = options_.max_batch_tokens;
  int32_t slots = options_.max_running;
  for (auto& [id, seq] : sequences_) {
    if (seq->prefilling() || budget == 0 || slots == 0) continue;
    const int32_t pos = seq->num_computed;
    batch->chunks.push_back({absl::MakeConstSpan(&seq->tokens[pos], 1), pos, seq->blocks, true});
    owners->push_back(seq.get());
    --budget;
    --slots;
  }
  for (auto& [id, seq] : sequences_) {
    if (!seq->prefilling() || budget == 0 || slots == 0) continue;
    const int32_t pos = seq->num_computed;
    const int32_t n = std::min(budget, seq->prompt_len() - pos);
    const bool last = pos + n == seq->prompt_len();
    batch->chunks.push_back({absl::MakeConstSpan(&seq->tokens[pos], n), pos, seq->blocks, last});
    owners->push_back(seq.get());
    budget -= n;
    --slots;
  }
}

absl::Status Engine::Step() {
  ForwardBatch batch;
  std::vector<Sequence*> owners;  // one per chunk
  BuildBatch(&batch, &owners);
  if (batch.chunks.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(runner_->Forward(batch, *cache_, &logits_));
  const int32_t vocab = runner_->config().n_vocab;
  size_t row = 0;
  for (size_t c = 0; c < batch.chunks.size(); ++c) {
    Sequence& seq = *owners[c];
    seq.num_computed += static_cast<int32_t>(batch.chunks[c].tokens.size());
    if (!batch.chunks[c].want_logits) continue;
    SampleNext(seq, absl::MakeSpan(&logits_[row * vocab], vocab));
    ++row;
  }
  ReapFinished();
  return absl::OkStatus();
}

void Engine::SampleNext(Sequence& seq, absl::Span<float> logits) {
  const int32_t index = seq.generated();
  const int32_t token = seq.sampler.Sample(logits, seq.tokens, static_cast<uint64_t>(index));
  seq.tokens.push_back(token);
  FinishReason reason = FinishReason::kNone;
  if (!seq.options.ignore_eos && tokenizer_->IsEog(token)) {
    reason = FinishReason::kEos;
  } else if (seq.generated() >= seq.options.max_tokens) {
    reason = FinishReason::kLength;
  }
  seq.on_event({seq.id, token, index, reason});
  if (reason != FinishReason::kNone) seq.finish = reason;
}

void Engine::Finish(Sequence& seq, FinishReason reason) {
  if (seq.finish != FinishReason::kNone) return;
  seq.finish = reason;
  seq.on_event({seq.id, -1, seq.generated(), reason});
}

void Engine::ReapFinished() {
  for (auto it = sequences_.begin(); it != sequences_.end();) {
    if (it->second->finish == FinishReason::kNone) {
      ++it;
      continue;
    }
    cache_->allocator().UnrefAll(it->second->blocks);
    it = sequences_.erase(it);
  }
}

}  // namespace pdserve
