#include "common/engine/copy_edits.h"

#include <algorithm>

namespace pdserve {

EditedView CopyEdits::Read(absl::Span<const int32_t> history) const {
  EditedView v;
  v.tokens.reserve(history.size());
  v.index.reserve(history.size());
  v.edited.reserve(history.size());
  const auto size = static_cast<int64_t>(history.size());
  for (int64_t i = 0; i < size;) {
    auto it = edits_.find(history[i]);
    const Edit* e = it == edits_.end() ? nullptr : &it->second;
    const auto n = e == nullptr ? 0 : static_cast<int64_t>(e->from.size());
    if (e != nullptr && i + n <= size &&
        std::equal(e->from.begin(), e->from.end(), history.begin() + i)) {
      for (size_t k = 0; k < e->to.size(); ++k) {
        v.tokens.push_back(e->to[k]);
        v.index.push_back(i);
        v.edited.push_back(static_cast<int32_t>(k));
      }
      i += n;
      continue;
    }
    v.tokens.push_back(history[i]);
    v.index.push_back(i);
    v.edited.push_back(-1);
    ++i;
  }
  return v;
}

void CopyEdits::OnVerified(absl::Span<const int32_t> history, int64_t at, const CopySource& from,
                           absl::Span<const int32_t> draft, int32_t kept) {
  if (kept >= static_cast<int32_t>(draft.size())) return;
  const auto k = static_cast<size_t>(kept);
  if (k >= from.index.size() || k >= from.edited.size()) return;
  const int64_t source = from.index[k];
  const int64_t wrote = at + kept;
  // The source must be history the draft was copied from, not a token of
  // the copy itself (a period repeated past the end) or of this step.
  if (source < 0 || source >= at || wrote >= static_cast<int64_t>(history.size())) return;
  if (from.edited[k] >= 0) {
    edits_.erase(history[source]);  // a learned edit was refused
    return;
  }
  if (history[wrote] == history[source] || from.match + kept < kMinAnchor) return;
  if (pending_.size() >= kMaxPending) pending_.erase(pending_.begin());
  pending_.push_back({source, wrote});
}

bool CopyEdits::Learn(absl::Span<const int32_t> history, const Pending& p) {
  const auto size = static_cast<int64_t>(history.size());
  // Pairs (source tokens j, model tokens k) by j + k, then j: the
  // smallest edit that explains what the model wrote.
  for (int32_t total = 2; total <= 2 * kMaxSpan; ++total) {
    for (int32_t j = std::max(1, total - kMaxSpan); j <= std::min(kMaxSpan, total - 1); ++j) {
      const int32_t k = total - j;
      const int64_t s = p.source + j, w = p.wrote + k;
      if (s + kConfirmTokens > p.wrote || w + kConfirmTokens > size) continue;
      if (!std::equal(history.begin() + s, history.begin() + s + kConfirmTokens,
                      history.begin() + w)) {
        continue;
      }
      Edit e{{history.begin() + p.source, history.begin() + p.source + j},
             {history.begin() + p.wrote, history.begin() + w}};
      if (edits_.size() < kMaxEdits || edits_.contains(e.from[0])) edits_[e.from[0]] = std::move(e);
      return true;
    }
  }
  return false;
}

void CopyEdits::Confirm(absl::Span<const int32_t> history) {
  const auto size = static_cast<int64_t>(history.size());
  // Decided once every pair could be checked: the model's longest span
  // and the confirming tokens after it are written.
  auto decided = [&](const Pending& p) {
    if (p.wrote + kMaxSpan + kConfirmTokens > size) return false;
    Learn(history, p);
    return true;
  };
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), decided), pending_.end());
}

}  // namespace pdserve
