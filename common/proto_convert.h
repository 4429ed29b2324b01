// Conversions between the wire messages of proto/pdserve/v1 and the
// engine's plain structs.
#ifndef PDSERVE_COMMON_PROTO_CONVERT_H_
#define PDSERVE_COMMON_PROTO_CONVERT_H_

#include "common/engine_loop.h"
#include "common/kv_cache.h"
#include "common/sampling_params.h"
#include "pdserve/v1/common.pb.h"
#include "pdserve/v1/worker.pb.h"

namespace pdserve {

// Unset proto fields keep the struct's defaults (greedy).
SamplingParams FromProto(const v1::SamplingParams& p);
v1::SamplingParams ToProto(const SamplingParams& s);

v1::KvLayout ToProto(const KvLayout& layout);
KvLayout FromProto(const v1::KvLayout& p);

v1::LoadReport ToLoadReport(const EngineLoad& load, bool draining);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_PROTO_CONVERT_H_
