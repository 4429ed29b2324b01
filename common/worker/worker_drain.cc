#include "common/worker/worker_drain.h"

#include "glog/logging.h"

namespace pdserve {

void DrainWorker(std::atomic<bool>& draining, GrpcServer& server, const EngineLoop& loop,
                 absl::Duration timeout) {
  draining.store(true);
  server.SetServing(false);
  if (!loop.WaitIdle(absl::Now() + timeout)) {
    LOG(WARNING) << "drain timeout: cancelling requests still in flight";
  }
  server.Shutdown(absl::Seconds(1));
}

}  // namespace pdserve
