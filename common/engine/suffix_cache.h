// SuffixCache: drafts from what earlier requests on this worker generated.
//
// Agent loops, templated reports and retried tool calls make a worker write
// the same spans again and again, in requests that share no prompt. The
// cache keeps the outputs of recently finished sequences (with the few
// prompt tokens before each, so that an output's start can be predicted)
// and, for every context of min_ngram..max_ngram tokens in them, how often
// each token followed it. A draft starts from the longest context that ends
// the sequence and follows the most frequent next token while it is the
// majority of what followed (SuffixDecoding's rule, on an n-gram index).
//
// Memory is bounded: past `capacity_tokens` the oldest outputs are dropped
// and their counts taken back out.
//
// Not thread-safe: the engine thread owns it.
#ifndef PDSERVE_COMMON_ENGINE_SUFFIX_CACHE_H_
#define PDSERVE_COMMON_ENGINE_SUFFIX_CACHE_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace pdserve {

class SuffixCache {
 public:
  SuffixCache(int64_t capacity_tokens, int32_t min_ngram, int32_t max_ngram);

  // Records `tokens` (the last prompt tokens, then the output); `context` of
  // them are prompt tokens, counted only as contexts, never as followers.
  void Add(absl::Span<const int32_t> tokens, int32_t context);
  // Up to `max_len` tokens likely to follow `history`; empty if its tail
  // was never seen.
  std::vector<int32_t> Draft(absl::Span<const int32_t> history, int32_t max_len) const;

  int64_t size_tokens() const { return size_tokens_; }

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    int32_t context;
  };
  // Next-token counts of one context.
  using Followers = absl::flat_hash_map<int32_t, int32_t>;

  static uint64_t Key(absl::Span<const int32_t> ngram);
  void Count(const Entry& e, int delta);
  // The most frequent follower of the longest known tail of `tokens`, if it
  // is the majority of that context's followers; -1 otherwise.
  int32_t Next(absl::Span<const int32_t> tokens) const;

  const int64_t capacity_tokens_;
  const int32_t min_ngram_;
  const int32_t max_ngram_;
  std::deque<Entry> entries_;
  int64_t size_tokens_ = 0;
  absl::flat_hash_map<uint64_t, Followers> index_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_SUFFIX_CACHE_H_
