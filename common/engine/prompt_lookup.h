// Prompt lookup: a draft copied from the sequence's own earlier tokens.
//
// Code edits, summaries with quotes, retrieval answers and agent loops
// repeat long spans of their prompt or of what they already wrote. If the
// last n tokens occurred before, what followed them then is a good guess of
// what follows now, and it costs a search of the history instead of a
// draft model.
#ifndef PDSERVE_COMMON_ENGINE_PROMPT_LOOKUP_H_
#define PDSERVE_COMMON_ENGINE_PROMPT_LOOKUP_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace pdserve {

// `max_len` tokens that followed the most recent earlier occurrence of the
// longest tail of `history` between `min_ngram` and `max_ngram` tokens long
// (where they reach the end of the history, the copy goes on from its own
// start, repeating the period); empty if no such tail occurred before.
// O(history * max_ngram).
std::vector<int32_t> PromptLookupDraft(absl::Span<const int32_t> history, int32_t min_ngram,
                                       int32_t max_ngram, int32_t max_len);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_PROMPT_LOOKUP_H_
