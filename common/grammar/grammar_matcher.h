// GrammarMatcher: the per-request state of a constrained generation. It
// follows the tokens the request has produced and gives, before each
// sampling step, the mask of tokens that keep the output inside the grammar.
//
// Per decode step:
//   if (!m.IsTerminated()) { m.FillMask(&words); ApplyMask(words, logits, n); }
//   ... sample `t` from the masked logits (before penalties and top-k) ...
//   m.Accept(t);   // false only if `t` was not allowed by the mask
// Speculative decoding accepts each kept draft token in turn and stops at the
// first refused one; Rollback(k) undoes the last k accepted tokens (no
// limit). Failover rebuilds a matcher and replays the relayed tokens with
// Accept: there is no state to copy.
//
// Mask words: bit (id % 32) of words[id / 32] is 1 when token `id` is
// allowed; MaskWords(vocab_size) words cover the logits width (bits past it
// are unspecified). Stop tokens are allowed exactly where the grammar may
// end; accepting one terminates the matcher.
//
// Threading: a GrammarMatcher is not thread-safe; one thread (the request's
// engine step) uses it at a time. Matchers sharing a CompiledGrammar are
// independent. Accept, Rollback and FillMask never throw and never abort on
// a token id; XGrammar's internal errors are logged and end the generation
// (the mask then allows only stop tokens).
#ifndef PDSERVE_COMMON_GRAMMAR_GRAMMAR_MATCHER_H_
#define PDSERVE_COMMON_GRAMMAR_GRAMMAR_MATCHER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "common/grammar/grammar_compiler.h"

namespace pdserve {

namespace grammar_internal {
struct MatcherRep;
}  // namespace grammar_internal

class GrammarMatcher {
 public:
  // `grammar` must be non-null; the matcher keeps it alive.
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);
  ~GrammarMatcher();
  GrammarMatcher(const GrammarMatcher&) = delete;
  GrammarMatcher& operator=(const GrammarMatcher&) = delete;
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

  // 32-bit words in a mask for `vocab_size` logits.
  static size_t MaskWords(int32_t vocab_size) {
    return (static_cast<size_t>(vocab_size) + 31) / 32;
  }

  // Advances by `token` when the grammar allows it; otherwise returns false
  // and leaves the state unchanged. After termination every token is refused.
  bool Accept(int32_t token);

  // Undoes the last `n` accepted tokens (a stop token included, which
  // un-terminates). CHECK-fails when n exceeds num_accepted(): a caller bug.
  void Rollback(int n);

  // True once a stop token has been accepted.
  bool IsTerminated() const;
  // True when the output so far is a complete match (a stop token may come
  // next), terminated or not.
  bool IsCompleted() const;

  // Writes the allowed-token mask into `words` (resized to
  // MaskWords(vocab_size())). After termination, or if XGrammar fails, only
  // the stop tokens are allowed. Returns false when every token of the
  // vocabulary is allowed (then ApplyMask can be skipped).
  bool FillMask(std::vector<uint32_t>* words);

  // Tokens accepted since construction minus those rolled back.
  int num_accepted() const { return num_accepted_; }
  int32_t vocab_size() const { return grammar_->vocab_size(); }
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  void FillStopOnly(std::vector<uint32_t>* words) const;

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::unique_ptr<grammar_internal::MatcherRep> rep_;
  int num_accepted_ = 0;
};

// Sets logits[i] to -INFINITY for every i < n whose bit in `words` is 0.
// A plain loop over the words, skipping all-ones words: ~0.04 ms for 262k
// logits (XGrammar's ApplyTokenBitmaskInplaceCPU takes ~1 ms and needs
// strides). CHECKs that `words` covers n bits.
void ApplyMask(absl::Span<const uint32_t> words, float* logits, int n);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_GRAMMAR_GRAMMAR_MATCHER_H_
