// Turns one row of logits into one token id, following llama.cpp's default
// chain: penalties -> top_k -> top_p -> min_p -> temperature -> dist
// (temperature 0 = greedy after penalties).
//
// The random draw is a pure function of (seed, step): the Sampler keeps no
// RNG state. A request whose first token is sampled by a prefill worker and
// whose later tokens come from a decode worker (or from a second decode
// worker after a migration) therefore gets exactly the tokens it would get
// in one process, given the same logits.
//
// Thread-safety: Sample() is const and uses only thread_local scratch, so one
// Sampler may be used from many threads at once.
#ifndef PDSERVE_COMMON_ENGINE_SAMPLER_H_
#define PDSERVE_COMMON_ENGINE_SAMPLER_H_

#include <cstdint>

#include "absl/types/span.h"
#include "common/request/sampling_params.h"

namespace pdserve {

class Sampler {
 public:
  // `params` must have passed ValidateSamplingParams.
  explicit Sampler(const SamplingParams& params);

  // `logits` is scratch (one entry per vocabulary id) and is modified.
  // `history` holds the prompt and the tokens generated so far; penalties
  // look at its last penalty_last_n entries. `step` is the index of the token
  // being generated (0 for the first) and selects the random draw.
  int32_t Sample(absl::Span<float> logits, absl::Span<const int32_t> history, uint64_t step) const;

  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
};

// Applies repetition/presence/frequency penalties in place, counting ids in
// the last penalty_last_n entries of `history`. Ids outside the vocabulary
// are ignored. Exposed so the exact arithmetic is testable.
void ApplyPenalties(const SamplingParams& params, absl::Span<float> logits,
                    absl::Span<const int32_t> history);

// The uniform variate in [0, 1) used for draw number `step` of `seed`: the
// step-th output of a SplitMix64 stream whose start is derived from `seed`.
double SamplingUniform(uint64_t seed, uint64_t step);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_SAMPLER_H_
