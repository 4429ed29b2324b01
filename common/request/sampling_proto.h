// Conversions between the wire SamplingParams (proto/pdserve/v1) and the
// engine's plain struct. Shared by the router (validation) and the workers.
#ifndef PDSERVE_COMMON_REQUEST_SAMPLING_PROTO_H_
#define PDSERVE_COMMON_REQUEST_SAMPLING_PROTO_H_

#include "common/request/sampling_params.h"
#include "pdserve/v1/common.pb.h"

namespace pdserve {

// Unset proto fields keep the struct's defaults (greedy).
SamplingParams FromProto(const v1::SamplingParams& p);
v1::SamplingParams ToProto(const SamplingParams& s);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_REQUEST_SAMPLING_PROTO_H_
