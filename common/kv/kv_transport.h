// KvSender / KvReceiver: the KV data plane between a prefill worker P and a
// decode worker D (docs/protocol/kv-wire.md). P pushes each layer's KV blocks of a
// request, as soon as that layer is computed, into blocks that D reserved
// for the request; a commit frame closes the transfer and D acknowledges it.
//
// This header is the contract the framed sender and receiver implement
// (control frames over TCP; payload over TCP, CUDA IPC or NCCL); it names no
// wire format and no I/O library.
//
// Identity: D assigns a transfer_id per request and an epoch per attempt.
// Retrying a transfer (another P, same reservation) bumps the epoch; frames of
// an older epoch are discarded by D and never written into its blocks.
//
// Block numbering: senders name blocks by their logical index in the
// sequence (0 = tokens 0..block_size-1). Physical block ids never cross the
// wire; each side maps logical indices to its own KvCache blocks.
#ifndef PDSERVE_COMMON_KV_KV_TRANSPORT_H_
#define PDSERVE_COMMON_KV_KV_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/engine/kv_cache.h"
#include "common/kv/kv_path.h"
#include "common/request/token_logprobs.h"

namespace pdserve {

// In KvReceiver::Expect's dst_block_ids: D already holds this logical block
// (prefix cache), so it must not be sent and any frame naming it is invalid.
inline constexpr int32_t kKvBlockNotSent = -1;

// Where and under which identity P sends one transfer.
struct KvTransferTarget {
  std::string endpoint;  // D's KV listener, "host:port"
  uint64_t transfer_id = 0;
  uint64_t epoch = 0;
  // Bounds every wait of this transfer (connect, queue, ack).
  absl::Time deadline = absl::InfiniteFuture();
  // How the layers' bytes travel (common/kv/kv_path.h).
  KvPath path = KvPath::kTcp;
};

// What the commit frame asserts and what D hands to its engine on success.
struct KvCommit {
  int32_t num_layers = 0;
  // Payload bytes of all layer frames. Filled in by the sender from what it
  // queued (callers leave it 0); on the receiver, the bytes actually written.
  uint64_t total_bytes = 0;
  // P's first sampled token; D's first decode step consumes it.
  int32_t first_token = -1;
  // Its log-probabilities, when the request asked for them: D emits the
  // first token, so they travel with it.
  std::optional<TokenLogprobs> first_token_logprobs = std::nullopt;
};

// Sender side (prefill worker).
//
// Thread-safety: implementations are thread-safe. P's engine thread calls
// SendLayer, which never waits on the network; Commit and Abort run on the
// exporter's threads (prefill_worker/kv_exporter.h), because Commit waits
// for D's ack and Abort / a failed Commit wait until no source block is read
// any more: for the transport's I/O thread to let go of them, and on the
// nccl path for the channel's sends to drain (bounded by the idle timeout).
//
// Memory contract: SendLayer may return before the bytes are on the wire and
// reads the source blocks later, straight from KvCache memory. The caller
// must keep every source block it passed allocated and unmodified until
// Commit or Abort for that transfer has returned. After any error from
// SendLayer or Commit the transfer is dead: call Abort (idempotent) to tell
// D and to release the transport's state.
class KvSender {
 public:
  virtual ~KvSender() = default;

  // Queues layer `layer` of the blocks logical_blocks[i], read from
  // src_cache's physical block src_block_ids[i]. Returns an error if the
  // arguments are invalid, the transfer already failed (e.g. the connection
  // to D broke), its deadline passed, or the send queue is full.
  virtual absl::Status SendLayer(const KvTransferTarget& target, int layer,
                                 absl::Span<const int32_t> logical_blocks, KvCache& src_cache,
                                 absl::Span<const int32_t> src_block_ids) = 0;

  // Sends the commit after all queued layers and waits, until
  // target.deadline, for D's acknowledgement. OK means D has every byte and
  // accepted the totals; otherwise D's status (e.g. DATA_LOSS), UNAVAILABLE
  // (connection failed) or DEADLINE_EXCEEDED. Ends the transfer either way.
  virtual absl::Status Commit(const KvTransferTarget& target, const KvCommit& commit) = 0;

  // Drops the transfer's unsent frames and tells D (best effort) that it is
  // abandoned. On return no source block of the transfer is read any more.
  virtual void Abort(const KvTransferTarget& target, std::string reason) = 0;

  // Tells D (best effort, never waits) that the transfer is being computed
  // although no layer is ready to send: D's wait for it restarts. Errors as
  // SendLayer's for a transfer that already failed.
  virtual absl::Status SendProgress(const KvTransferTarget& target) = 0;
};

// Receiver side (decode worker).
//
// Ownership: from a successful Expect until its on_done fires, the
// transport may write into the reserved blocks (only those, and only for
// frames of that transfer and epoch). on_done fires exactly once per
// successful Expect, on the transport's I/O thread, after the last write
// into the blocks; it must not block. An Expect that returns an error never
// calls on_done.
//
// Thread-safety: Expect, Cancel and num_pending may be called from any
// thread, including from inside on_done.
class KvReceiver {
 public:
  using DoneCallback = std::function<void(absl::StatusOr<KvCommit>)>;

  virtual ~KvReceiver() = default;

  // Registers a reservation: dst_block_ids[i] is D's physical block for
  // logical block i, or kKvBlockNotSent. The transfer completes when every
  // layer < num_layers of every sent block arrived and the commit's totals
  // match; on_done then receives the commit. `deadline` bounds the wait
  // for progress, not the whole transfer: each layer frame that arrives
  // moves it to (about) its arrival + (deadline - the time of this call),
  // so a long prompt prefilled chunk by chunk is never cut off while its
  // layers keep coming. Errors: DEADLINE_EXCEEDED (no frame for that long),
  // CANCELLED (Cancel), ABORTED (sender abort, or a later
  // Expect of a higher epoch superseded this one), INVALID_ARGUMENT /
  // DATA_LOSS (frames that do not validate, totals that do not match).
  //
  // An Expect for a transfer_id that is pending with a lower epoch replaces
  // it; with an equal or higher epoch it fails with FAILED_PRECONDITION. No
  // frame of the new epoch is written before the old epoch's writes have
  // stopped (a device channel still receiving for it is stopped in the
  // background and the new epoch's frames wait for that; Expect itself
  // never waits on a peer).
  virtual absl::Status Expect(uint64_t transfer_id, uint64_t epoch,
                              std::vector<int32_t> dst_block_ids, int num_layers,
                              absl::Time deadline, DoneCallback on_done) = 0;

  // Ends a pending transfer with CANCELLED; no-op if none. Never waits on a
  // peer. Usually on_done has run by the time it returns; but a device
  // channel (NCCL) receiving into the blocks is left to complete that
  // receive, bounded by the transport's frame timeout, so that the channel
  // stays in step for the other transfers it carries. Either way the blocks
  // are the caller's again only once on_done has run.
  virtual void Cancel(uint64_t transfer_id) = 0;

  // Reservations whose on_done has not fired yet.
  virtual size_t num_pending() const = 0;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_TRANSPORT_H_
