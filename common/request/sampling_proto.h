// Conversions between the wire SamplingParams and TokenLogprobs
// (proto/pdserve/v1/common.proto) and the engine's plain structs. Shared by
// the router (validation) and the workers.
#ifndef PDSERVE_COMMON_REQUEST_SAMPLING_PROTO_H_
#define PDSERVE_COMMON_REQUEST_SAMPLING_PROTO_H_

#include "common/request/sampling_params.h"
#include "common/request/token_logprobs.h"
#include "pdserve/v1/common.pb.h"

namespace pdserve {

// Unset proto fields keep the struct's defaults (greedy, no logprobs).
SamplingParams FromProto(const v1::SamplingParams& p);
v1::SamplingParams ToProto(const SamplingParams& s);
v1::Constraint ToProto(const GrammarConstraint& c);

TokenLogprobs FromProto(const v1::TokenLogprobs& p);
v1::TokenLogprobs ToProto(const TokenLogprobs& l);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_REQUEST_SAMPLING_PROTO_H_
