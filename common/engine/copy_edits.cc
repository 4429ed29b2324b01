#include "common/engine/copy_edits.h"

#include <algorithm>

namespace pdserve {

const EditedView& CopyEdits::Read(absl::Span<const int32_t> history) {
  const auto size = static_cast<int64_t>(history.size());
  if (read_.size() > history.size() || !std::equal(read_.begin(), read_.end(), history.begin())) {
    ForgetReading();
  }
  TruncateReading(view_entries_);
  bool final = true;
  for (auto i = static_cast<int64_t>(read_.size()); i < size;) {
    auto it = edits_.find(history[i]);
    const Edit* e = it == edits_.end() ? nullptr : &it->second;
    const auto n = e == nullptr ? 0 : static_cast<int64_t>(e->from.size());
    if (i + n > size && final) {
      // Whether the edit applies here waits on tokens not yet written:
      // from here on the reading is provisional.
      final = false;
      read_.insert(read_.end(), history.begin() + static_cast<int64_t>(read_.size()),
                   history.begin() + i);
      view_entries_ = view_.tokens.size();
    }
    if (e != nullptr && i + n <= size &&
        std::equal(e->from.begin(), e->from.end(), history.begin() + i)) {
      for (size_t k = 0; k < e->to.size(); ++k) {
        view_.tokens.push_back(e->to[k]);
        view_.index.push_back(i);
        view_.edited.push_back(static_cast<int32_t>(k));
      }
      i += n;
      continue;
    }
    view_.tokens.push_back(history[i]);
    view_.index.push_back(i);
    view_.edited.push_back(-1);
    ++i;
  }
  if (final) {
    read_.insert(read_.end(), history.begin() + static_cast<int64_t>(read_.size()), history.end());
    view_entries_ = view_.tokens.size();
  }
  return view_;
}

void CopyEdits::ForgetReading() {
  // Released, not only emptied: the edits change rarely, and with none
  // left nothing is read through them until one is learned.
  view_ = {};
  read_ = {};
  view_entries_ = 0;
}

void CopyEdits::TruncateReading(size_t entries) {
  view_.tokens.resize(entries);
  view_.index.resize(entries);
  view_.edited.resize(entries);
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
    // A learned edit was refused.
    if (edits_.erase(history[source]) > 0) ForgetReading();
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
      if (edits_.size() < kMaxEdits || edits_.contains(e.from[0])) {
        edits_[e.from[0]] = std::move(e);
        ForgetReading();
      }
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
