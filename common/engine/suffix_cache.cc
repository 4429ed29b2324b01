#include "common/engine/suffix_cache.h"

#include <algorithm>

#include "absl/hash/hash.h"

namespace pdserve {

SuffixCache::SuffixCache(int64_t capacity_tokens, int32_t min_ngram, int32_t max_ngram)
    : capacity_tokens_(capacity_tokens),
      min_ngram_(std::max(1, min_ngram)),
      max_ngram_(std::max(std::max(1, min_ngram), max_ngram)) {}

// The n-gram's length is part of the key: contexts of different lengths
// never share counts.
uint64_t SuffixCache::Key(absl::Span<const int32_t> ngram) {
  return absl::HashOf(ngram.size(), ngram);
}

void SuffixCache::Add(absl::Span<const int32_t> tokens, int32_t context) {
  if (capacity_tokens_ <= 0 || static_cast<int64_t>(tokens.size()) <= context) return;
  Entry e{std::vector<int32_t>(tokens.begin(), tokens.end()), context};
  Count(e, +1);
  size_tokens_ += static_cast<int64_t>(e.tokens.size());
  entries_.push_back(std::move(e));
  while (size_tokens_ > capacity_tokens_ && !entries_.empty()) {
    Count(entries_.front(), -1);
    size_tokens_ -= static_cast<int64_t>(entries_.front().tokens.size());
    entries_.pop_front();
  }
}

void SuffixCache::Count(const Entry& e, int delta) {
  const auto size = static_cast<int32_t>(e.tokens.size());
  const absl::Span<const int32_t> all(e.tokens);
  for (int32_t next = std::max(e.context, 1); next < size; ++next) {
    for (int32_t n = min_ngram_; n <= max_ngram_ && n <= next; ++n) {
      const uint64_t key = Key(all.subspan(next - n, n));
      if (delta > 0) {
        index_[key][e.tokens[next]] += 1;
        continue;
      }
      auto it = index_.find(key);
      if (it == index_.end()) continue;
      auto f = it->second.find(e.tokens[next]);
      if (f != it->second.end() && --f->second == 0) it->second.erase(f);
      if (it->second.empty()) index_.erase(it);
    }
  }
}

int32_t SuffixCache::Next(absl::Span<const int32_t> tokens) const {
  const auto size = static_cast<int32_t>(tokens.size());
  for (int32_t n = std::min(max_ngram_, size); n >= min_ngram_; --n) {
    auto it = index_.find(Key(tokens.subspan(size - n, n)));
    if (it == index_.end()) continue;
    int32_t best = -1, best_count = 0, total = 0;
    for (const auto& [token, count] : it->second) {
      total += count;
      // Ties go to the lower id, so a draft does not depend on hash order.
      if (count > best_count || (count == best_count && token < best)) {
        best = token;
        best_count = count;
      }
    }
    return 2 * best_count > total ? best : -1;
  }
  return -1;
}

std::vector<int32_t> SuffixCache::Draft(absl::Span<const int32_t> history, int32_t max_len) const {
  std::vector<int32_t> draft;
  if (index_.empty() || max_len <= 0) return draft;
  // The tail the lookups see: the history's last max_ngram tokens, then
  // the draft so far.
  const size_t keep = std::min(history.size(), static_cast<size_t>(max_ngram_));
  std::vector<int32_t> tail(history.end() - static_cast<std::ptrdiff_t>(keep), history.end());
  while (static_cast<int32_t>(draft.size()) < max_len) {
    const int32_t next = Next(tail);
    if (next < 0) break;
    draft.push_back(next);
    tail.push_back(next);
    if (static_cast<int32_t>(tail.size()) > max_ngram_) tail.erase(tail.begin());
  }
  return draft;
}

}  // namespace pdserve
