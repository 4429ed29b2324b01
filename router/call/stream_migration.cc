#include "router/call/stream_migration.h"

#include <algorithm>
#include <utility>

namespace pdserve::router {

void StreamMigration::Begin(Offer offer) {
  offer_ = std::move(offer);
  handoff_ = -1;
}

bool StreamMigration::FitsTarget(const v1::KvLayout& layout) const {
  return layout.SerializeAsString() == offer_->layout.SerializeAsString();
}

int StreamMigration::StartHandoff() {
  handoff_ = handoff_attempts_++;
  return handoff_;
}

int StreamMigration::Complete() {
  const int source = offer_->source;
  ++moves_;
  offer_.reset();
  return source;
}

std::optional<StreamMigration::Abandoned> StreamMigration::Abandon() {
  if (!offer_.has_value()) return std::nullopt;
  Abandoned a;
  a.source = offer_->source;
  if (handoff_ >= 0) a.handoff = handoff_;
  offer_.reset();
  return a;
}

double KvUtilization(const v1::LoadReport& load, int64_t extra_blocks) {
  if (load.kv_blocks_total() == 0) return 0;
  const int64_t used = int64_t{load.kv_blocks_total()} - load.kv_blocks_free() + extra_blocks;
  return static_cast<double>(used) / load.kv_blocks_total();
}

bool HasRoomElsewhere(const RegistrySnapshot& snapshot, const WorkerState& here, int64_t blocks,
                      double threshold, const std::string& model_fingerprint) {
  const std::string layout = here.info.kv_layout().SerializeAsString();
  return std::any_of(snapshot.decode.begin(), snapshot.decode.end(), [&](const WorkerState& w) {
    return w.address != here.address && w.live && w.has_info && !w.load.draining() &&
           w.info.model_fingerprint() == model_fingerprint &&
           w.info.kv_layout().SerializeAsString() == layout && w.load.kv_blocks_free() >= blocks &&
           KvUtilization(w.load, blocks) < threshold;
  });
}

}  // namespace pdserve::router
