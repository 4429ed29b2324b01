#include "common/worker/worker_drain.h"

#include "glog/logging.h"

namespace pdserve {

bool DrainWorker(std::atomic<bool>& draining, GrpcServer& server, EngineLoop& loop,
                 absl::Duration timeout, const DrainHook& hook) {
  const absl::Time deadline = absl::Now() + timeout;
  draining.store(true);
  server.SetServing(false);
  if (hook) hook(deadline);
  const bool idle = loop.WaitIdle(deadline);
  if (!idle) LOG(WARNING) << "drain timeout: cancelling requests still in flight";
  const EngineLoad load = loop.load();
  // Operators (and tests) read from this line that nothing was left behind.
  LOG(INFO) << "drained: " << load.kv_blocks_free << " of " << load.kv_blocks_total
            << " KV blocks free, " << load.running + load.waiting << " sequences left";
  server.Shutdown(absl::Seconds(1));
  return idle;
}

}  // namespace pdserve
