#include "router/placement/placement_ledger.h"

#include <algorithm>

namespace pdserve::router {

void PlacementLedger::Record(const std::string& worker, absl::Time report_at, int64_t blocks) {
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[worker];
  if (e.report_at != report_at) e = Entry{report_at, 0, 0};  // a newer report counts the rest
  e.blocks += blocks;
  ++e.sequences;
}

void PlacementLedger::Apply(RegistrySnapshot* snapshot) const {
  absl::MutexLock lock(&mu_);
  for (WorkerState& w : snapshot->decode) {
    auto it = entries_.find(w.address);
    if (it == entries_.end() || it->second.report_at != w.last_report) continue;
    const int64_t free = static_cast<int64_t>(w.load.kv_blocks_free()) - it->second.blocks;
    w.load.set_kv_blocks_free(static_cast<uint32_t>(std::max<int64_t>(free, 0)));
    w.load.set_running(w.load.running() + static_cast<uint32_t>(it->second.sequences));
  }
}

}  // namespace pdserve::router
