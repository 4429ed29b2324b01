// Conversions between the worker protocol's messages (proto/pdserve/v1)
// and the engine's plain structs: the KV layout both tiers must agree on,
// and the load report a worker streams to the router.
#ifndef PDSERVE_COMMON_WORKER_WORKER_PROTO_H_
#define PDSERVE_COMMON_WORKER_WORKER_PROTO_H_

#include "common/engine/engine_loop.h"
#include "common/engine/kv_cache.h"
#include "pdserve/v1/worker.pb.h"

namespace pdserve {

v1::KvLayout ToProto(const KvLayout& layout);
KvLayout FromProto(const v1::KvLayout& p);

v1::LoadReport ToLoadReport(const EngineLoad& load, bool draining);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_WORKER_WORKER_PROTO_H_
