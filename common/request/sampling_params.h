// Per-request decoding knobs and their validation. The struct is plain data
// shared by the router (which validates user input once, at the edge) and
// the workers (which build a Sampler from it); semantics follow llama.cpp's
// samplers so that users moving from llama-server get what they expect.
#ifndef PDSERVE_COMMON_REQUEST_SAMPLING_PARAMS_H_
#define PDSERVE_COMMON_REQUEST_SAMPLING_PARAMS_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "common/request/grammar_constraint.h"

namespace pdserve {

struct SamplingParams {
  // 0 selects greedy decoding (first index of the max logit after penalties);
  // the truncation samplers below are then irrelevant.
  float temperature = 0.0f;
  // Keep only the k largest logits; 0 disables.
  int32_t top_k = 0;
  // Nucleus: keep the smallest prefix (by probability) whose mass reaches
  // top_p; 1 disables.
  float top_p = 1.0f;
  // Keep tokens whose probability is at least min_p times the best one;
  // 0 disables.
  float min_p = 0.0f;
  // llama.cpp convention: positive logits are divided, non-positive ones
  // multiplied, so a penalty > 1 always makes a seen token less likely.
  float repetition_penalty = 1.0f;
  // Subtracted once from every token seen in the penalty window.
  float presence_penalty = 0.0f;
  // Subtracted once per occurrence in the penalty window.
  float frequency_penalty = 0.0f;
  // Size of the penalty window over prompt + generated tokens; 0 disables.
  int32_t penalty_last_n = 64;
  // Together with the step index, fully determines every random draw.
  uint64_t seed = 0;
  // Report the log-probability of each chosen token and of this many most
  // likely alternatives (0..kMaxLogprobs); -1 reports none. Not a sampling
  // knob: the values are the model's own (log-softmax of the raw logits,
  // before penalties and temperature), but like vLLM the request carries it
  // here, next to the settings of the step that computes it.
  int32_t logprobs = -1;
  // Speculative decoding for this request (common/engine/speculation.h):
  // on, off, or unset for the worker's default. Not a sampling knob either,
  // and never one that changes the output: only how many tokens a step
  // may produce.
  std::optional<bool> speculative;
  // Structured output: the answer must match this (common/grammar/). The
  // engine masks the logits with the request's grammar matcher before the
  // chain above, so greedy decoding stays a pure function of the prompt.
  std::optional<GrammarConstraint> constraint;
};

// The longest constraint text a request may carry: compile time and memory
// grow with it (a 12 kB, 20-tool schema compiles in ~100 ms on a 262k
// vocabulary).
inline constexpr size_t kMaxConstraintBytes = 64 * 1024;

// The most alternatives SamplingParams::logprobs may ask for (OpenAI's
// top_logprobs limit): each costs a partial sort step and wire bytes on
// every token.
inline constexpr int32_t kMaxLogprobs = 20;

// INVALID_ARGUMENT naming the offending field, or OK. Runs once per request
// at the edge so the engine never sees NaN or out-of-range values.
absl::Status ValidateSamplingParams(const SamplingParams& params);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_REQUEST_SAMPLING_PARAMS_H_
