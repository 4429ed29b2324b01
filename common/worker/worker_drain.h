// DrainWorker: the SIGTERM path shared by the prefill and decode workers —
// refuse new work, report NOT_SERVING, let in-flight sequences finish
// (bounded), then stop the server.
#ifndef PDSERVE_COMMON_WORKER_WORKER_DRAIN_H_
#define PDSERVE_COMMON_WORKER_WORKER_DRAIN_H_

#include <atomic>

#include "absl/time/time.h"
#include "common/engine/engine_loop.h"
#include "common/rpc/grpc_server.h"

namespace pdserve {

void DrainWorker(std::atomic<bool>& draining, GrpcServer& server, const EngineLoop& loop,
                 absl::Duration timeout);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_WORKER_WORKER_DRAIN_H_
