// KvReservation: what a decode worker expects of one KV transfer, and what
// has arrived so far. It decides whether a frame header may write into the
// reserved blocks (before any payload byte is read) and whether a commit
// completes the transfer. Pure bookkeeping: no I/O, no callbacks.
//
// Not thread-safe: the receiver's I/O thread owns it.
#ifndef PDSERVE_COMMON_KV_KV_RESERVATION_H_
#define PDSERVE_COMMON_KV_KV_RESERVATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/engine/kv_cache.h"
#include "common/kv/kv_transport.h"
#include "pdserve/v1/kv_frame.pb.h"

namespace pdserve {

class KvReservation {
 public:
  // INVALID_ARGUMENT unless num_layers is in [1, cache layers], every
  // dst id is kKvBlockNotSent or a block of the cache, and no physical
  // block appears twice (two logical blocks must never share memory).
  static absl::Status Validate(const std::vector<int32_t>& dst_block_ids, int num_layers,
                               const KvLayout& layout, int32_t cache_blocks);

  // Arguments must have passed Validate(). A window layer of `layout`
  // expects only the blocks from KvLayout::FirstSentBlock on.
  KvReservation(uint64_t transfer_id, uint64_t epoch, std::vector<int32_t> dst_block_ids,
                int num_layers, const KvLayout& layout);

  uint64_t transfer_id() const { return transfer_id_; }
  uint64_t epoch() const { return epoch_; }
  int num_layers() const { return num_layers_; }
  // D's physical block for a logical index that ClaimLayerBlocks accepted.
  int32_t dst_block(uint32_t logical) const { return dst_block_ids_[logical]; }

  // Validates a LAYER_BLOCKS header of this transfer and epoch (its shape
  // already checked by CheckKvFrameShape) and claims its (layer, block)
  // cells, so a second frame for the same cell is rejected even while the
  // first one's payload is still arriving. INVALID_ARGUMENT on a layer or
  // block out of range, a block D did not ask for (held, or before a window
  // layer's first sent block), or a duplicate.
  absl::Status ClaimLayerBlocks(const v1::KvFrameHeader& header);

  // Records a claimed frame's payload as fully written.
  void AddWrittenBytes(uint64_t bytes) { written_bytes_ += bytes; }
  uint64_t written_bytes() const { return written_bytes_; }

  // The commit if the COMMIT header agrees with what was written and every
  // expected cell arrived; DATA_LOSS otherwise.
  absl::StatusOr<KvCommit> CheckCommit(const v1::KvFrameHeader& header) const;

 private:
  size_t Cell(uint32_t layer, uint32_t logical) const {
    return static_cast<size_t>(layer) * dst_block_ids_.size() + logical;
  }

  const uint64_t transfer_id_;
  const uint64_t epoch_;
  const std::vector<int32_t> dst_block_ids_;
  const int num_layers_;
  const int64_t bytes_per_layer_block_;
  std::vector<int32_t> first_block_;  // per layer: FirstSentBlock
  int64_t cells_to_send_ = 0;         // over all layers
  std::vector<bool> claimed_;   // [layer][logical block]
  uint64_t written_bytes_ = 0;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_RESERVATION_H_
