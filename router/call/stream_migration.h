// StreamMigration: the KV-migration sub-machine of one Generate request
// (GenerateFsm). A decode worker that drains, or that is nearly full while
// another has room (rebalancing), offers the request's stream; the request
// is placed on a target decode worker, the source pushes the KV to the
// target's reservation (Handoff), and the target's first tokens complete
// the move. This holds the move's state and its small decisions; the FSM
// carries out the transitions (generate_fsm_migration.cc), as it does for
// PrefillAttempts and the Watchdog.
//
// Not thread-safe: owned by its GenerateFsm.
#ifndef PDSERVE_ROUTER_CALL_STREAM_MIGRATION_H_
#define PDSERVE_ROUTER_CALL_STREAM_MIGRATION_H_

#include <cstdint>
#include <optional>
#include <string>

#include "pdserve/v1/common.pb.h"
#include "pdserve/v1/worker.pb.h"
#include "router/pool/worker_snapshot.h"

namespace pdserve::router {

class StreamMigration {
 public:
  // The offered stream: its decode attempt (whose stream's channel carries
  // the Handoff) and worker, its KV layout (the target's must equal it),
  // the tokens generated when it was offered, and the offer's id (echoed in
  // the Handoff).
  struct Offer {
    int source = -1;
    std::string source_address;
    v1::KvLayout layout;
    int32_t generated = 0;
    uint64_t offer_id = 0;
  };
  // What an abandoned move leaves to cancel.
  struct Abandoned {
    int source = -1;
    std::optional<int> handoff;
  };

  // A move is in progress (offered, not yet completed or abandoned).
  bool active() const { return offer_.has_value(); }
  const Offer& offer() const { return *offer_; }
  void Begin(Offer offer);
  // A target decode worker can take the stream's KV.
  bool FitsTarget(const v1::KvLayout& layout) const;

  // The target reserved: the Handoff call's attempt number.
  int StartHandoff();
  bool IsCurrentHandoff(int attempt) const { return active() && attempt == handoff_; }
  void HandoffEnded() { handoff_ = -1; }

  // The target's first tokens arrived: the move is done. The source's
  // decode attempt, to cancel.
  int Complete();
  // The move failed or the request ended: what to cancel, if a move was on.
  std::optional<Abandoned> Abandon();
  // Moves completed so far (Finished.placement.decode_migrations).
  int moves() const { return moves_; }

  // Rebalancing asks each decode attempt's worker at most once.
  bool offer_asked() const { return offer_asked_; }
  void MarkOfferAsked() { offer_asked_ = true; }
  void NewDecodeAttempt() { offer_asked_ = false; }

 private:
  std::optional<Offer> offer_;
  int handoff_ = -1;  // the current Handoff call (-1 until the target reserved)
  int handoff_attempts_ = 0;
  int moves_ = 0;
  bool offer_asked_ = false;
};

// Rebalancing's test: a decode worker other than `here`, live, serving
// `model_fingerprint` with `here`'s KV layout, that has `blocks` free and
// stays below `threshold` of its KV pool with them (so that the stream does
// not move back, nor on to a third worker, on the next report).
bool HasRoomElsewhere(const RegistrySnapshot& snapshot, const WorkerState& here, int64_t blocks,
                      double threshold, const std::string& model_fingerprint);
// Of the worker's KV pool, the share in use once `extra_blocks` more are.
double KvUtilization(const v1::LoadReport& load, int64_t extra_blocks = 0);

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_STREAM_MIGRATION_H_
