#include "common/grammar/grammar_matcher.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <utility>

#include "common/grammar/xgrammar_internal.h"
#include "glog/logging.h"

namespace pdserve {
namespace grammar_internal {

struct MatcherRep {
  explicit MatcherRep(const xgrammar::CompiledGrammar& compiled) : matcher(compiled) {}
  xgrammar::GrammarMatcher matcher;
};

}  // namespace grammar_internal

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)) {
  CHECK(grammar_ != nullptr);
  try {
    // Stops come from the TokenizerInfo (our explicit eog ids); the matcher
    // terminates only on a stop token, never just because the root rule ended.
    rep_ = std::make_unique<grammar_internal::MatcherRep>(grammar_->rep_->compiled);
  } catch (const std::exception& e) {
    LOG(FATAL) << "XGrammar could not create a matcher: " << e.what();
  }
}

GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

bool GrammarMatcher::Accept(int32_t token) {
  const grammar_internal::VocabInfo& vocab = *grammar_->rep_->vocab;
  // Refuse here what XGrammar would refuse with a warning on stderr.
  if (token < 0 || token >= vocab.vocab_size || vocab.never_allowed[token]) return false;
  if (IsTerminated()) return false;
  bool accepted = false;
  try {
    accepted = rep_->matcher.AcceptToken(token);
  } catch (const std::exception& e) {
    LOG(ERROR) << "XGrammar AcceptToken(" << token << ") failed: " << e.what();
    return false;
  }
  if (accepted) ++num_accepted_;
  return accepted;
}

void GrammarMatcher::Rollback(int n) {
  CHECK_GE(n, 0);
  CHECK_LE(n, num_accepted_) << "rolling back more tokens than were accepted";
  if (n == 0) return;
  try {
    rep_->matcher.Rollback(n);
  } catch (const std::exception& e) {
    // Our count says the history is there: the matcher state is now unknown.
    LOG(FATAL) << "XGrammar Rollback(" << n << ") failed: " << e.what();
  }
  num_accepted_ -= n;
}

bool GrammarMatcher::IsTerminated() const { return rep_->matcher.IsTerminated(); }

bool GrammarMatcher::IsCompleted() const { return rep_->matcher.IsCompleted(); }

void GrammarMatcher::FillStopOnly(std::vector<uint32_t>* words) const {
  std::fill(words->begin(), words->end(), 0u);
  for (int32_t id : grammar_->stop_token_ids()) words->at(id / 32) |= 1u << (id % 32);
}

bool GrammarMatcher::FillMask(std::vector<uint32_t>* words) {
  words->resize(MaskWords(vocab_size()));
  // XGrammar CHECK-fails (throws) when asked for a mask after the stop token.
  if (IsTerminated()) {
    FillStopOnly(words);
    return true;
  }
  // A 1-D int32 CPU tensor of exactly GetBitmaskSize(vocab_size) words;
  // XGrammar checks dtype, ndim, shape and device, and reads no strides.
  int64_t shape[1] = {static_cast<int64_t>(words->size())};
  DLTensor tensor{};
  tensor.data = words->data();
  tensor.device = DLDevice{kDLCPU, 0};
  tensor.ndim = 1;
  tensor.dtype = xgrammar::GetBitmaskDLType();  // {kDLInt, 32, 1}
  tensor.shape = shape;
  tensor.strides = nullptr;
  tensor.byte_offset = 0;
  try {
    return rep_->matcher.FillNextTokenBitmask(&tensor);
  } catch (const std::exception& e) {
    LOG(ERROR) << "XGrammar FillNextTokenBitmask failed, ending the generation: " << e.what();
    FillStopOnly(words);
    return true;
  }
}

void ApplyMask(absl::Span<const uint32_t> words, float* logits, int n) {
  CHECK_GE(n, 0);
  CHECK_GE(words.size() * 32, static_cast<size_t>(n)) << "mask shorter than the logits";
  const int full_words = n / 32;
  for (int w = 0; w < full_words; ++w) {
    const uint32_t word = words[w];
    if (word == ~0u) continue;  // the common case while the grammar is loose
    float* base = logits + w * 32;
    for (int b = 0; b < 32; ++b) {
      if (!((word >> b) & 1u)) base[b] = -INFINITY;
    }
  }
  for (int i = full_words * 32; i < n; ++i) {
    if (!((words[i / 32] >> (i % 32)) & 1u)) logits[i] = -INFINITY;
  }
}

}  // namespace pdserve
