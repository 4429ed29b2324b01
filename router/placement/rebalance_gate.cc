#include "router/placement/rebalance_gate.h"

namespace pdserve::router {

bool RebalanceGate::TryStart(const std::string& worker, absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = last_.try_emplace(worker, now);
  if (!inserted) {
    if (now - it->second < spacing_) return false;
    it->second = now;
  }
  return true;
}

}  // namespace pdserve::router
