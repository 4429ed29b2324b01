// KvEpochFence: the KV receiver's bookkeeping of who may still write into a
// transfer's blocks across its epochs (docs/protocol/kv-wire.md, "NCCL path" and
// "Transfer state machine (receiver)"). A prefill retry's new epoch reuses
// the blocks of the old one, and an old epoch's NCCL receive may still be
// landing bytes in them after the epoch ended; the fence says when the new
// epoch may write and when an ended epoch's blocks may be handed back.
//
// The rules it keeps:
// - an ended epoch whose channels still receive into its blocks waits
//   ("ending") until each has settled (finished, or stopped);
// - ended epochs of one transfer complete oldest first: an epoch that ends
//   while an older one still writes waits for it, even with no writer of
//   its own;
// - while any ended epoch of a transfer waits, the current epoch's layer
//   frames are held back; they are handed back (Unfence) once none waits,
//   or when the current epoch ends itself (then as frames of no current
//   reservation);
// - a closed connection's held frames are dropped (nothing of them was
//   claimed).
//
// No I/O: the receiver drives it (closing connections, running on_done,
// planning frames again) from what it returns. Ended epochs are named by a
// Ticket so the receiver can keep whatever it owns for them. Connections are
// only compared and handed back, never used.
//
// Thread-safety: none; the receiver uses it on its I/O thread only.
#ifndef PDSERVE_COMMON_KV_KV_EPOCH_FENCE_H_
#define PDSERVE_COMMON_KV_KV_EPOCH_FENCE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "pdserve/v1/kv_frame.pb.h"

namespace pdserve {

class KvReceiveConnection;

class KvEpochFence {
 public:
  using ConnPtr = std::shared_ptr<KvReceiveConnection>;
  // Names an ended epoch that waits; unique for the fence's lifetime.
  using Ticket = uint64_t;

  // A layer frame held back, its connection deferred.
  struct HeldFrame {
    ConnPtr conn;
    v1::KvFrameHeader header;
  };

  // What ending the current epoch of a transfer leaves to the receiver.
  struct Ended {
    // Set when the epoch may not complete yet (a channel of its own, or of
    // an older epoch, still writes into the blocks): NextSettled hands the
    // ticket back once it may. Unset: it completes now.
    std::optional<Ticket> waits_as;
    // The frames it held back, in arrival order, to be planned again now
    // as frames of no current reservation.
    std::vector<HeldFrame> released;
  };

  KvEpochFence() = default;
  KvEpochFence(const KvEpochFence&) = delete;
  KvEpochFence& operator=(const KvEpochFence&) = delete;

  // (transfer_id, epoch) became the transfer's current epoch. At most one
  // per transfer: the previous one must have ended.
  void Open(uint64_t transfer_id, uint64_t epoch);
  // The current epoch ended (committed, failed, cancelled, superseded).
  Ended End(uint64_t transfer_id);

  // Whether an ended epoch of `transfer_id` still waits: the current
  // epoch's layer frames must not write yet.
  bool Fenced(uint64_t transfer_id) const;
  // Holds a frame of the current epoch back if the transfer is fenced;
  // whether it did.
  bool HoldIfFenced(uint64_t transfer_id, const ConnPtr& conn, const v1::KvFrameHeader& header);
  // The current epoch's held frames once the transfer is no longer fenced
  // (to be planned again); none while it is.
  std::vector<HeldFrame> Unfence(uint64_t transfer_id);

  // conn's channel started receiving into the current epoch's blocks.
  void BeginChannelWrite(uint64_t transfer_id, const ConnPtr& conn);
  // conn's channel finished receiving into the current epoch's blocks:
  // whether it was one of its writers (false when the epoch ended
  // meanwhile: see SettleChannel).
  bool EndChannelWrite(uint64_t transfer_id, const ConnPtr& conn);
  // Whether conn's channel writes into the blocks of an ended epoch.
  bool FeedsEnded(const ConnPtr& conn) const;
  // conn's channel, which wrote into an ended epoch's blocks, finished or
  // was stopped: the transfer of that epoch (its settled epochs can now
  // complete, NextSettled), or nullopt when conn fed no ended epoch.
  std::optional<uint64_t> SettleChannel(const ConnPtr& conn);
  // Takes the oldest ended epoch of `transfer_id` if nothing writes into
  // its blocks any more. Nullopt when none waits, or the oldest still
  // writes (the newer ones wait for it). Call until nullopt: one at a time,
  // so that what the receiver runs for one epoch sees the others waiting.
  std::optional<Ticket> NextSettled(uint64_t transfer_id);
  // The connections whose channels still write into ended epochs of
  // `transfer_id`: to be closed when their receives should be cut short.
  std::vector<ConnPtr> EndedWriters(uint64_t transfer_id) const;

  // conn closed: its held frames are dropped. Returns the transfers whose
  // current epoch its channel was receiving into (that receive is lost).
  std::vector<uint64_t> DropConnection(const ConnPtr& conn);
  // Every ended epoch still waiting, in the order they ended; the fence
  // forgets them. For shutdown, once no channel can write any more.
  std::vector<Ticket> TakeAllEnded();

 private:
  struct Current {
    uint64_t epoch = 0;
    absl::flat_hash_set<ConnPtr> channel_writers;
    std::vector<HeldFrame> held;
  };
  struct Ending {
    Ticket ticket = 0;
    uint64_t transfer_id = 0;
    uint64_t epoch = 0;
    absl::flat_hash_set<ConnPtr> channel_writers;
  };

  // The oldest ended epoch of `transfer_id` (the first ended among equal
  // epochs), or ending_.end().
  std::vector<Ending>::iterator Oldest(uint64_t transfer_id);

  absl::flat_hash_map<uint64_t, Current> current_;  // by transfer_id
  std::vector<Ending> ending_;                      // in the order they ended
  Ticket next_ticket_ = 1;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_EPOCH_FENCE_H_
