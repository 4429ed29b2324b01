// PlacementLedger: what this router placed on each decode worker since
// that worker's last load report. Load reports arrive every
// --load_poll_ms, so a burst placed between two of them would all see the
// same free blocks and go to the same worker (least_loaded herds). The
// ledger's entries are subtracted from a copy of the snapshot before a
// placement and dropped once a newer report (which counts them) arrives.
//
// Thread-safe (one mutex; entries are a few integers per worker).
#ifndef PDSERVE_ROUTER_PLACEMENT_PLACEMENT_LEDGER_H_
#define PDSERVE_ROUTER_PLACEMENT_PLACEMENT_LEDGER_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "router/pool/worker_snapshot.h"

namespace pdserve::router {

class PlacementLedger {
 public:
  // A request reserving `blocks` was placed on `worker` when its last
  // report was the one stamped `report_at`.
  void Record(const std::string& worker, absl::Time report_at, int64_t blocks);
  // Applies the placements newer than each decode worker's report in
  // `snapshot`: fewer free blocks, more running sequences.
  void Apply(RegistrySnapshot* snapshot) const;

 private:
  struct Entry {
    absl::Time report_at;
    int64_t blocks = 0;
    int64_t sequences = 0;
  };
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_PLACEMENT_PLACEMENT_LEDGER_H_
