// Log-probabilities of one row of logits, as reported to clients who ask
// for them (SamplingParams::logprobs; OpenAI's logprobs / top_logprobs).
//
// They describe the model, not the sampler: log-softmax of the raw logits,
// before penalties, temperature or truncation (vLLM's default, and what a
// client comparing two settings expects), so the engine computes them from
// the row as the model produced it, never from the one Sampler::Sample
// rewrote.
#ifndef PDSERVE_COMMON_ENGINE_LOGPROBS_H_
#define PDSERVE_COMMON_ENGINE_LOGPROBS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "common/request/token_logprobs.h"

namespace pdserve {

// The log-probability of `token` (an index into `logits`) and of the
// min(top_n, logits.size()) most likely tokens, most likely first, equal
// logits by lower id (so a greedy token is top[0]). `top_n` >= 0. O(vocab):
// one pass for the normalizer (log-sum-exp in double) and one for the top.
TokenLogprobs ComputeTokenLogprobs(absl::Span<const float> logits, int32_t token, int32_t top_n);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_LOGPROBS_H_
