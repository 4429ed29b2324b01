// The log-probabilities reported with a generated token when the request
// asks for them (SamplingParams::logprobs). Plain data: the engine computes
// it (common/engine/logprobs.h), the KV commit carries the first token's
// from the prefill worker to the decode worker, and sampling_proto.h
// converts it to and from the wire TokenLogprobs.
#ifndef PDSERVE_COMMON_REQUEST_TOKEN_LOGPROBS_H_
#define PDSERVE_COMMON_REQUEST_TOKEN_LOGPROBS_H_

#include <cstdint>
#include <vector>

namespace pdserve {

// One candidate token and its natural-log probability.
struct TopLogprob {
  int32_t token = -1;
  float logprob = 0.0f;

  friend bool operator==(const TopLogprob&, const TopLogprob&) = default;
};

struct TokenLogprobs {
  int32_t token = -1;    // the chosen token
  float logprob = 0.0f;  // its log-probability under the model (<= 0)
  // The SamplingParams::logprobs most likely tokens, most likely first
  // (equal values: lower id first); it may include `token`.
  std::vector<TopLogprob> top;

  friend bool operator==(const TokenLogprobs&, const TokenLogprobs&) = default;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_REQUEST_TOKEN_LOGPROBS_H_
