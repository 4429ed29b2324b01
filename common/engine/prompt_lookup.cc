#include "common/engine/prompt_lookup.h"

#include <algorithm>

namespace pdserve {

std::vector<int32_t> PromptLookupDraft(absl::Span<const int32_t> history, int32_t min_ngram,
                                       int32_t max_ngram, int32_t max_len) {
  const auto size = static_cast<int64_t>(history.size());
  min_ngram = std::max(1, min_ngram);
  if (max_len < 1) return {};
  for (int64_t n = std::min<int64_t>(max_ngram, size - 1); n >= min_ngram; --n) {
    const int32_t* tail = history.data() + size - n;
    // The most recent occurrence first: nearby text is the likeliest to be
    // repeated next (the function being rewritten, the turn being quoted).
    for (int64_t start = size - n - 1; start >= 0; --start) {
      if (!std::equal(tail, tail + n, history.data() + start)) continue;
      // Copied as LZ77 copies: past the end of the history the copy reads
      // its own output, so a match just behind the tail (a loop, a
      // repeated line) still drafts max_len tokens of the same period.
      std::vector<int32_t> draft;
      draft.reserve(static_cast<size_t>(max_len));
      for (int64_t i = start + n; static_cast<int64_t>(draft.size()) < max_len; ++i) {
        draft.push_back(i < size ? history[i] : draft[i - size]);
      }
      return draft;
    }
  }
  return {};
}

}  // namespace pdserve
