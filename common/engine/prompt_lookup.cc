#include "common/engine/prompt_lookup.h"

#include <algorithm>

namespace pdserve {
namespace {

struct Match {
  int64_t next = -1;  // index in the view of the token after the match
  int32_t length = 0;
};

// The earlier place of `view` whose tokens match the tail of `history`
// longest (at most max_match, at least min_match; the latest among
// equals). Places must end before `limit`, where the view reads the
// tail's own last token.
Match LongestMatch(absl::Span<const int32_t> view, int64_t limit, absl::Span<const int32_t> history,
                   int32_t min_match, int32_t max_match) {
  const auto size = static_cast<int64_t>(history.size());
  const int32_t last = history[size - 1];
  Match best;
  // The most recent first, so that nearby text wins ties (the function
  // being rewritten, the turn being quoted).
  for (int64_t end = limit - 1; end >= 0 && best.length < max_match; --end) {
    if (view[end] != last) continue;
    int32_t m = 1;
    while (m < max_match && end - m >= 0 && m < size && view[end - m] == history[size - 1 - m]) {
      ++m;
    }
    if (m > best.length) best = {end + 1, m};
  }
  if (best.length < min_match) return {};
  return best;
}

// Whether the reading through the edits should supply the draft: where it
// matches longer, or as long and its next max_len tokens carry an edit. A
// tail both readings match equally (a copy between two renamed spans) is
// followed by the text the sequence was seen to rewrite: drafting the old
// text there would only be refused.
bool PreferEdited(const Match& through, const Match& plain, const EditedView& view,
                  int32_t max_len) {
  if (through.next < 0 || through.length < plain.length) return false;
  if (through.length > plain.length) return true;
  const int64_t end =
      std::min<int64_t>(static_cast<int64_t>(view.tokens.size()), through.next + max_len);
  for (int64_t i = through.next; i < end; ++i) {
    if (view.edited[i] >= 0) return true;
  }
  return false;
}

}  // namespace

LookupDraft PromptLookupDraft(absl::Span<const int32_t> history, int32_t min_match,
                              int32_t max_match, int32_t max_len, CopyEdits* edits) {
  min_match = std::max(1, min_match);
  max_match = std::max(min_match, max_match);
  const auto size = static_cast<int64_t>(history.size());
  if (max_len < 1 || size < 2) return {};
  Match found = LongestMatch(history, size - 1, history, min_match, max_match);
  const EditedView* edited = nullptr;  // the reading the draft is copied from, if not as is
  if (edits != nullptr && !edits->empty()) {
    const EditedView& view = edits->Read(history);
    // The view's last token is the tail's own (edits apply to earlier text
    // alike): candidates end before the span that reads history's last token.
    auto limit = static_cast<int64_t>(view.tokens.size());
    while (limit > 0 && view.index[limit - 1] == size - 1) --limit;
    const Match through = LongestMatch(view.tokens, limit, history, min_match, max_match);
    if (PreferEdited(through, found, view, max_len)) {
      found = through;
      edited = &view;
    }
  }
  if (found.next < 0) return {};
  LookupDraft draft;
  draft.from.match = found.length;
  draft.tokens.reserve(static_cast<size_t>(max_len));
  auto push = [&draft](int32_t token, int64_t index, int32_t offset) {
    draft.tokens.push_back(token);
    draft.from.index.push_back(index);
    draft.from.edited.push_back(offset);
  };
  if (edited != nullptr) {
    // Through the edits the copy stops at the history's end.
    const auto end =
        std::min<int64_t>(static_cast<int64_t>(edited->tokens.size()), found.next + max_len);
    for (int64_t i = found.next; i < end; ++i) {
      push(edited->tokens[i], edited->index[i], edited->edited[i]);
    }
    return draft;
  }
  // Copied as LZ77 copies: past the end of the history the copy reads its
  // own output, so a match just behind the tail (a loop, a repeated line)
  // still drafts max_len tokens of the same period.
  for (int64_t i = found.next; static_cast<int64_t>(draft.tokens.size()) < max_len; ++i) {
    if (i < size) {
      push(history[i], i, -1);
    } else {
      push(draft.tokens[i - size], -1, -1);
    }
  }
  return draft;
}

}  // namespace pdserve
