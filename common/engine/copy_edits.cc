#include "common/engine/copy_edits.h"

#include <algorithm>

namespace pdserve {

void CopyEdits::OnVerified(absl::Span<const int32_t> history, int64_t at, const CopySource& from,
                           absl::Span<const int32_t> draft, int32_t kept) {
  const auto size = static_cast<int64_t>(history.size());
  if (kept >= static_cast<int32_t>(draft.size()) || from.source < 0) return;
  const int64_t source = from.source + kept;
  const int64_t wrote = at + kept;
  // The source must be history the draft was copied from, not a token of
  // the copy itself (a period repeated past the end) or of this step.
  if (source >= at || wrote >= size) return;
  const int32_t old_token = history[source];
  const int32_t model_token = history[wrote];
  const int32_t drafted = draft[kept];
  if (drafted != old_token) edits_.erase(old_token);  // a learned replacement was refused
  if (model_token == old_token || from.match + kept < kMinAnchor) return;
  if (pending_.size() >= kMaxPending) pending_.erase(pending_.begin());
  pending_.push_back({old_token, model_token, source + 1, wrote + 1});
}

void CopyEdits::Confirm(absl::Span<const int32_t> history) {
  const auto size = static_cast<int64_t>(history.size());
  auto decided = [&](const Pending& p) {
    if (p.output_next + kConfirmTokens > size) return false;
    bool same = true;
    for (int32_t i = 0; i < kConfirmTokens && same; ++i) {
      // Through the map: a second rename inside the confirming tokens does
      // not hide the first.
      same = Map(history[p.source_next + i]) == history[p.output_next + i];
    }
    if (same && (edits_.size() < kMaxEdits || edits_.contains(p.from))) edits_[p.from] = p.to;
    return true;
  };
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), decided), pending_.end());
}

}  // namespace pdserve
