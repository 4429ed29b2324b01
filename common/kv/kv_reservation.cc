#include "common/kv/kv_reservation.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/request/sampling_proto.h"

namespace pdserve {

absl::Status KvReservation::Validate(const std::vector<int32_t>& dst_block_ids, int num_layers,
                                     const KvLayout& layout, int32_t cache_blocks) {
  if (num_layers < 1 || num_layers > layout.n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("kv reservation: num_layers ", num_layers,
                                                   " not in [1, ", layout.n_layers, "]"));
  }
  absl::flat_hash_set<int32_t> seen;
  for (int32_t id : dst_block_ids) {
    if (id == kKvBlockNotSent) continue;
    if (id < 0 || id >= cache_blocks) {
      return absl::InvalidArgumentError(
          absl::StrCat("kv reservation: block id ", id, " not in [0, ", cache_blocks, ")"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("kv reservation: block id ", id, " reserved twice"));
    }
  }
  return absl::OkStatus();
}

KvReservation::KvReservation(uint64_t transfer_id, uint64_t epoch,
                             std::vector<int32_t> dst_block_ids, int num_layers,
                             const KvLayout& layout)
    : transfer_id_(transfer_id),
      epoch_(epoch),
      dst_block_ids_(std::move(dst_block_ids)),
      num_layers_(num_layers),
      bytes_per_layer_block_(layout.bytes_per_layer_block()),
      claimed_(static_cast<size_t>(num_layers) * dst_block_ids_.size(), false) {
  const auto n_blocks = static_cast<int32_t>(dst_block_ids_.size());
  for (int layer = 0; layer < num_layers_; ++layer) {
    first_block_.push_back(layout.FirstSentBlock(layer, n_blocks));
    for (int32_t b = first_block_.back(); b < n_blocks; ++b) {
      cells_to_send_ += dst_block_ids_[b] != kKvBlockNotSent;
    }
  }
}

absl::Status KvReservation::ClaimLayerBlocks(const v1::KvFrameHeader& header) {
  const uint32_t layer = header.layer();
  if (layer >= static_cast<uint32_t>(num_layers_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv frame: layer ", layer, " not in [0, ", num_layers_, ")"));
  }
  // Check everything before claiming anything, so a rejected frame leaves
  // no trace (the whole reservation fails anyway, but keep it clean).
  absl::flat_hash_set<uint32_t> in_frame;
  for (uint32_t logical : header.block_indices()) {
    if (logical >= dst_block_ids_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("kv frame: block index ", logical,
                                                     " not in [0, ", dst_block_ids_.size(), ")"));
    }
    if (dst_block_ids_[logical] == kKvBlockNotSent) {
      return absl::InvalidArgumentError(
          absl::StrCat("kv frame: block index ", logical, " is held by the receiver"));
    }
    if (static_cast<int32_t>(logical) < first_block_[layer]) {
      return absl::InvalidArgumentError(
          absl::StrCat("kv frame: layer ", layer, " block ", logical,
                       " is before its window's first block ", first_block_[layer]));
    }
    if (claimed_[Cell(layer, logical)] || !in_frame.insert(logical).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("kv frame: duplicate layer ", layer, " block ", logical));
    }
  }
  for (uint32_t logical : header.block_indices()) claimed_[Cell(layer, logical)] = true;
  return absl::OkStatus();
}

absl::StatusOr<KvCommit> KvReservation::CheckCommit(const v1::KvFrameHeader& header) const {
  const uint64_t expected_bytes = static_cast<uint64_t>(cells_to_send_ * bytes_per_layer_block_);
  if (header.num_layers() != static_cast<uint32_t>(num_layers_)) {
    return absl::DataLossError(
        absl::StrCat("kv commit: ", header.num_layers(), " layers, expected ", num_layers_));
  }
  if (written_bytes_ != expected_bytes || header.total_bytes() != written_bytes_) {
    return absl::DataLossError(absl::StrCat("kv commit: sender sent ", header.total_bytes(),
                                            " bytes, ", written_bytes_, " written, ",
                                            expected_bytes, " expected"));
  }
  // Every byte written belongs to a claimed cell and every cell is claimed
  // at most once, so the byte count proves every cell arrived.
  KvCommit commit;
  commit.num_layers = num_layers_;
  commit.total_bytes = written_bytes_;
  commit.first_token = header.first_token();
  if (header.has_first_token_logprobs()) {
    commit.first_token_logprobs = FromProto(header.first_token_logprobs());
  }
  return commit;
}

}  // namespace pdserve
