// CopyEdits: the replacements a sequence makes while it copies.
//
// Refactors, renames and templated rewrites copy long spans of the prompt
// with a few spans replaced the same way each time (a parameter renamed in
// every function). Prompt lookup drafts the old text at each occurrence and
// loses the rest of that draft. CopyEdits learns the replacement from the
// verification itself: where a draft copied from history[s] was refused
// because the model wrote something else at history[w], and the model's
// text from w + k goes on for kConfirmTokens tokens exactly as the source
// does from s + j, the sequence replaced the j source tokens by its k
// (both at most kMaxSpan; the shortest pair wins). Identifiers often tokenize
// differently, so 1:1 is not enough: `(vals` is one token and
// `(measurements` three. Later drafts may then read the source through
// the learned edits (prompt_lookup.h), so the copy carries the rename.
//
// Only drafts anchored by kMinAnchor tokens of matching context teach: a
// draft copied from a merely similar place (another function with another
// local) would otherwise teach an edit the sequence never made. An edit
// whose drafted text is refused is forgotten. At most kMaxEdits are kept,
// one per first source token.
//
// Not thread-safe: the engine thread owns each sequence's.
#ifndef PDSERVE_COMMON_ENGINE_COPY_EDITS_H_
#define PDSERVE_COMMON_ENGINE_COPY_EDITS_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace pdserve {

// The history read through a sequence's edits: each token, and where it
// came from.
struct EditedView {
  std::vector<int32_t> tokens;
  // The history index of the token, or of the start of the replaced span.
  std::vector<int64_t> index;
  // -1 for a token read as is; else its offset in the replacement.
  std::vector<int32_t> edited;
};

// Where each token of a draft was copied from (prompt_lookup.h).
struct CopySource {
  int32_t match = 0;            // tokens of context that matched before the draft
  std::vector<int64_t> index;   // per draft token: as EditedView::index; -1 past the history
  std::vector<int32_t> edited;  // per draft token: as EditedView::edited
};

class CopyEdits {
 public:
  static constexpr int32_t kMinAnchor = 8;
  static constexpr int32_t kConfirmTokens = 3;
  static constexpr int32_t kMaxSpan = 4;
  static constexpr size_t kMaxEdits = 64;
  static constexpr size_t kMaxPending = 8;

  bool empty() const { return edits_.empty(); }
  size_t size() const { return edits_.size(); }
  // The history with every learned edit applied where its source text
  // occurs, left to right. The reading is kept until the next call: a
  // history that extends the one read last (a sequence's tokens grow by
  // appends) is read on from the first place whose reading could still
  // change (an edit's source cut off by the end), so a step costs a compare
  // of the history read before, not a lookup per token. A change of the
  // edits, or of earlier history, reads it again from the start.
  const EditedView& Read(absl::Span<const int32_t> history);

  // A draft copied from `from` and placed at history[at...] was verified:
  // its first `kept` tokens were kept and, if kept < draft.size(),
  // history[at + kept] is what the model wrote instead. `history` is the
  // sequence's tokens after the step.
  void OnVerified(absl::Span<const int32_t> history, int64_t at, const CopySource& from,
                  absl::Span<const int32_t> draft, int32_t kept);
  // Learns the pending edits whose confirming tokens `history` now holds
  // and drops those the model did not confirm.
  void Confirm(absl::Span<const int32_t> history);

 private:
  struct Edit {
    std::vector<int32_t> from, to;
  };
  struct Pending {
    int64_t source;  // history index of the first refused source token
    int64_t wrote;   // history index of the model's first token there
  };

  // The shortest confirmed edit at `p`, if any.
  bool Learn(absl::Span<const int32_t> history, const Pending& p);
  // Forgets the kept reading and frees its buffers (the edits changed).
  void ForgetReading();
  // Drops the reading's entries past its first `entries`.
  void TruncateReading(size_t entries);

  absl::flat_hash_map<int32_t, Edit> edits_;  // by from[0]
  std::vector<Pending> pending_;

  // The last reading: view_ is the reading of the history read_ then
  // the provisional reading of the rest of that history; read_ holds
  // the positions whose reading is final (the first view_entries_
  // entries of view_).
  EditedView view_;
  std::vector<int32_t> read_;
  size_t view_entries_ = 0;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_COPY_EDITS_H_
