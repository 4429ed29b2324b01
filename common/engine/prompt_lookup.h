// Prompt lookup: a draft copied from the sequence's own earlier tokens.
//
// Code edits, summaries with quotes, retrieval answers and agent loops
// repeat long spans of their prompt or of what they already wrote. If the
// tail of the history occurred before, what followed it then is a good
// guess of what follows now, and it costs a search of the history instead
// of a draft model. The longer the tail that matched, the likelier the
// place is the one being copied: a function's body follows its own
// signature, not the last line that looked like its first one.
#ifndef PDSERVE_COMMON_ENGINE_PROMPT_LOOKUP_H_
#define PDSERVE_COMMON_ENGINE_PROMPT_LOOKUP_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/engine/copy_edits.h"

namespace pdserve {

struct LookupDraft {
  std::vector<int32_t> tokens;
  CopySource from;  // where each token came from
};

// Up to `max_len` tokens that followed the earlier position of `history`
// whose preceding tokens match its tail longest (compared up to
// `max_match` tokens, at least `min_match`; the most recent among equals).
// Where the copy reaches the end of the history it goes on from its own
// start, repeating the period. With `edits`, the history is also read
// through the sequence's learned edits (copy_edits.h), and that reading
// wins where its match is longer, or as long with an edit among the tokens
// it would draft; the draft then carries them (and stops at the history's
// end); `edits` keeps its reading for the next call (CopyEdits::Read).
// Empty if no tail of `min_match` tokens occurred before.
// O(history + the lengths compared).
LookupDraft PromptLookupDraft(absl::Span<const int32_t> history, int32_t min_match,
                              int32_t max_match, int32_t max_len, CopyEdits* edits = nullptr);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_PROMPT_LOOKUP_H_
