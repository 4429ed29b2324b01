// DrainWorker: the SIGTERM path shared by the prefill and decode workers —
// refuse new work, report NOT_SERVING, let in-flight sequences finish or
// move elsewhere (bounded), then stop the server.
#ifndef PDSERVE_COMMON_WORKER_WORKER_DRAIN_H_
#define PDSERVE_COMMON_WORKER_WORKER_DRAIN_H_

#include <atomic>
#include <functional>

#include "absl/time/time.h"
#include "common/engine/engine_loop.h"
#include "common/rpc/grpc_server.h"

namespace pdserve {

// What a tier does with its in-flight work while draining (the decode
// tier migrates streams): runs once the worker is NOT_SERVING and returns
// by `deadline`, the end of the drain window.
using DrainHook = std::function<void(absl::Time deadline)>;

// Returns whether the worker got idle (every sequence done or moved, every
// KV block free) before the window ended.
bool DrainWorker(std::atomic<bool>& draining, GrpcServer& server, EngineLoop& loop,
                 absl::Duration timeout, const DrainHook& hook = nullptr);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_WORKER_WORKER_DRAIN_H_
