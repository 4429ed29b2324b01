// CopyEdits: the token replacements a sequence makes while it copies.
//
// Refactors, renames and templated rewrites copy long spans of the prompt
// with a few tokens replaced the same way each time (a parameter renamed in
// every function). Prompt lookup drafts the old token at each occurrence and
// loses the rest of that draft. CopyEdits learns the replacement from the
// verification itself: where a draft copied from history[s] was refused at
// A = history[s] because the model wrote B, and the model's next
// kConfirmTokens tokens go on as the source after A does, the sequence
// replaced A by B there. Later drafts may then read the source through the
// learned map (prompt_lookup.h), so the copy carries the rename.
//
// Only drafts anchored by kMinAnchor tokens of matching context teach: a
// draft copied from a merely similar place (another function with another
// local) would otherwise teach a replacement the sequence never made. A
// replacement whose drafted token is refused is forgotten. The map holds at
// most kMaxEdits replacements.
//
// Not thread-safe: the engine thread owns each sequence's.
#ifndef PDSERVE_COMMON_ENGINE_COPY_EDITS_H_
#define PDSERVE_COMMON_ENGINE_COPY_EDITS_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace pdserve {

// Where a draft was copied from (prompt_lookup.h).
struct CopySource {
  int64_t source = -1;  // history index its first token was copied from
  int32_t match = 0;    // tokens of context that matched before it
};

class CopyEdits {
 public:
  static constexpr int32_t kMinAnchor = 8;
  static constexpr int32_t kConfirmTokens = 3;
  static constexpr size_t kMaxEdits = 64;
  static constexpr size_t kMaxPending = 8;

  // What a copy of `token` should read: its replacement, or itself.
  int32_t Map(int32_t token) const {
    auto it = edits_.find(token);
    return it == edits_.end() ? token : it->second;
  }
  bool empty() const { return edits_.empty(); }
  size_t size() const { return edits_.size(); }

  // A draft copied from `from` and placed at history[at...] was verified:
  // its first `kept` tokens were kept and, if kept < draft.size(),
  // history[at + kept] is what the model wrote instead. `history` is the
  // sequence's tokens after the step.
  void OnVerified(absl::Span<const int32_t> history, int64_t at, const CopySource& from,
                  absl::Span<const int32_t> draft, int32_t kept);
  // Learns the pending replacements whose confirming tokens `history` now
  // holds (the model went on as the source did) and drops the others.
  void Confirm(absl::Span<const int32_t> history);

 private:
  struct Pending {
    int32_t from, to;
    int64_t source_next;  // history index of the source's token after `from`
    int64_t output_next;  // history index of the output's token after `to`
  };

  absl::flat_hash_map<int32_t, int32_t> edits_;
  std::vector<Pending> pending_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_COPY_EDITS_H_
