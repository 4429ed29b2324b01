// The compatibility handshake both worker kinds answer GetInfo with
// (docs/protocol/worker-control-plane.md, "GetInfo, GetLoad, WatchLoad").
#ifndef PDSERVE_COMMON_WORKER_WORKER_INFO_H_
#define PDSERVE_COMMON_WORKER_WORKER_INFO_H_

#include <string>

#include "common/engine/kv_cache.h"
#include "common/model/model.h"
#include "pdserve/v1/worker.pb.h"

namespace pdserve {

// Everything but the role-specific fields (a decode worker adds its
// kv_endpoint).
v1::WorkerInfo DescribeWorker(v1::WorkerRole role, const std::string& worker_id, const Model& model,
                              const KvLayout& layout);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_WORKER_WORKER_INFO_H_
