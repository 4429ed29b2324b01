#include "common/engine/prompt_lookup.h"

#include <algorithm>

namespace pdserve {
namespace {

// The position just after the earlier match of history's tail that is
// longest (at most max_match, at least min_match; the latest among equals),
// reading earlier tokens through `read`; `from.source` is -1 if none.
template <typename Read>
CopySource LongestMatch(absl::Span<const int32_t> history, int32_t min_match, int32_t max_match,
                        Read read) {
  const auto size = static_cast<int64_t>(history.size());
  const int32_t last = history.empty() ? 0 : history[size - 1];
  CopySource best;
  // `end` is the candidate aligned with the tail's last token; the most
  // recent first, so that nearby text wins ties (the function being
  // rewritten, the turn being quoted).
  for (int64_t end = size - 2; end >= 0 && best.match < max_match; --end) {
    if (read(history[end]) != last) continue;
    int32_t m = 1;
    while (m < max_match && end - m >= 0 && read(history[end - m]) == history[size - 1 - m]) ++m;
    if (m > best.match) best = {end + 1, m};
  }
  if (best.match < min_match) return {};
  return best;
}

}  // namespace

LookupDraft PromptLookupDraft(absl::Span<const int32_t> history, int32_t min_match,
                              int32_t max_match, int32_t max_len, const CopyEdits* edits) {
  min_match = std::max(1, min_match);
  max_match = std::max(min_match, max_match);
  if (max_len < 1 || history.size() < 2) return {};
  const auto same = [](int32_t t) { return t; };
  CopySource from = LongestMatch(history, min_match, max_match, same);
  bool mapped = false;
  if (edits != nullptr && !edits->empty()) {
    const auto map = [edits](int32_t t) { return edits->Map(t); };
    const CopySource through = LongestMatch(history, min_match, max_match, map);
    mapped = through.match > from.match;
    if (mapped) from = through;
  }
  if (from.source < 0) return {};
  // Copied as LZ77 copies: past the end of the history the copy reads its
  // own output, so a match just behind the tail (a loop, a repeated line)
  // still drafts max_len tokens of the same period.
  const auto size = static_cast<int64_t>(history.size());
  LookupDraft draft{{}, from};
  draft.tokens.reserve(static_cast<size_t>(max_len));
  for (int64_t i = from.source; static_cast<int64_t>(draft.tokens.size()) < max_len; ++i) {
    if (i >= size) {
      draft.tokens.push_back(draft.tokens[i - size]);
    } else {
      draft.tokens.push_back(mapped ? edits->Map(history[i]) : history[i]);
    }
  }
  return draft;
}

}  // namespace pdserve
