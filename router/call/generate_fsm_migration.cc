// GenerateFsm's KV-migration transitions (StreamMigration holds the
// move's state): an offered stream placed on a target, the Handoff, and a
// failed move recomputed. Apart from generate_fsm.cc to keep each file
// one concern; the class and its invariants are in generate_fsm.h.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"
#include "router/call/generate_fsm.h"
#include "router/call/worker_failure.h"
#include "router/call/worker_requests.h"

namespace pdserve::router {
namespace {

// A stream needs this many tokens still to go to be worth moving.
constexpr int32_t kRebalanceMinTokensLeft = 64;

}  // namespace

void GenerateFsm::HandleMigrating(const v1::Migrating& migrating, Actions* a) {
  const std::string address = decode_worker_.address;
  const int32_t generated = static_cast<int32_t>(relay_->generated_ids().size());
  // Anything else is left to the stream's end (the offer lapses there):
  // the failover recomputes.
  if (state_ != State::kStreaming || migration_.active() || !env_.config->decode_migration ||
      generated < 1 || relay_->ended()) {
    return;
  }
  if (migrating.generated_tokens() != generated) {
    LOG(WARNING) << "[" << id_ << "] decode worker " << address << " offered the stream after "
                 << migrating.generated_tokens() << " tokens, but " << generated
                 << " were relayed; not moving it";
    return;
  }
  LOG(INFO) << "[" << id_ << "] decode worker " << address
            << " offers the stream: moving it with its KV after " << generated << " tokens";
  migration_.Begin({decode_, address, decode_worker_.info.kv_layout(), generated,
                    migrating.offer_id()});
  if (!prefilled_locally_.has_value()) prefilled_locally_ = local_prefill_;
  // The source's stream stays open (its worker holds the KV for the
  // Handoff) but is no longer read.
  decode_active_ = false;
  reads_paused_ = false;
  refusals_.RecordRefusal(address, grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                                "the stream is moving off this worker"));
  // A recompute after a failed move waits for a decode worker like a
  // failover.
  failover_wait_until_ = Now() + retry_.failover_wait;
  StopPrefillSide(a);  // a Prefill call still out only reports
  Place(a);
}

void GenerateFsm::MaybeRebalance(Actions* a) {
  const double threshold = env_.config->rebalance_kv_utilization;
  // A move that fails is recomputed as a failover: only with budget left,
  // so that a voluntary move can never fail the request.
  if (threshold <= 0 || env_.rebalance == nullptr || !env_.config->decode_migration ||
      state_ != State::kStreaming || !decode_active_ || migration_.active() ||
      migration_.offer_asked() || failovers_ >= retry_.decode_failovers) {
    return;
  }
  const int32_t generated = static_cast<int32_t>(relay_->generated_ids().size());
  if (request_.max_tokens - generated < kRebalanceMinTokensLeft) return;
  const std::shared_ptr<const RegistrySnapshot> snapshot = env_.workers->snapshot();
  const WorkerState* here = snapshot->FindDecode(decode_worker_.address);
  if (here == nullptr || KvUtilization(here->load) < threshold) return;
  const int64_t block = std::max(here->info.kv_layout().block_size(), 1u);
  const int64_t blocks =
      (static_cast<int64_t>(request_.prompt_tokens.size()) + request_.max_tokens + block - 1) /
      block;
  const bool room = HasRoomElsewhere(*snapshot, *here, blocks, threshold, env_.model_fingerprint);
  if (!room || !env_.rebalance->TryStart(here->address, Now())) return;
  migration_.MarkOfferAsked();
  a->offer_migration = decode_;
  LOG(INFO) << "[" << id_ << "] decode worker " << here->address << " is "
            << static_cast<int>(KvUtilization(here->load) * 100)
            << "% full: asking it to move this stream elsewhere";
}

GenerateFsm::Actions GenerateFsm::OnOfferMigrationDone(int attempt, const grpc::Status& status) {
  Actions a;
  // Its Migrating event, if it offered, comes on the stream; a refusal
  // (the stream ended meanwhile, an older worker) changes nothing.
  if (!status.ok() && !done()) {
    LOG(INFO) << "[" << id_ << "] the decode worker of attempt " << attempt
              << " did not offer the stream: " << StatusCodeName(status.error_code()) << ": "
              << status.error_message();
  }
  return a;
}

void GenerateFsm::StartHandoff(const v1::Reserved& reserved, Actions* a) {
  timeline_.MarkReserved(Now());
  const StreamMigration::Offer& offer = migration_.offer();
  a->start_handoff =
      HandoffStart{migration_.StartHandoff(), offer.source,
                   MakeHandoffRequest(id_, offer.offer_id, reserved,
                                      decode_worker_.info.kv_endpoint())};
  LOG(INFO) << "[" << id_ << "] reserved on " << decode_worker_.address << " (transfer "
            << reserved.transfer_id() << ", " << reserved.cached_prefix_tokens()
            << " cached tokens): " << offer.source_address << " hands the KV over";
}

GenerateFsm::Actions GenerateFsm::OnHandoffDone(int attempt, const grpc::Status& status,
                                                const v1::HandoffResponse& response) {
  Actions a;
  if (!migration_.IsCurrentHandoff(attempt) || done()) return a;
  migration_.HandoffEnded();
  if (status.ok()) {
    // The target's first tokens complete the move.
    LOG(INFO) << "[" << id_ << "] handed over " << response.kv_transfer_bytes()
              << " bytes of KV in " << response.kv_transfer_ms() << " ms";
    return a;
  }
  RecomputeAfterFailedMigration(absl::StrCat("the handoff from ", migration_.offer().source_address,
                                             " failed: ", StatusCodeName(status.error_code()),
                                             ": ", status.error_message()),
                                &a);
  return a;
}

void GenerateFsm::AbandonMigration(Actions* a) {
  const std::optional<StreamMigration::Abandoned> abandoned = migration_.Abandon();
  if (!abandoned.has_value()) return;
  a->cancel_source = abandoned->source;
  a->cancel_handoff = abandoned->handoff;
}

void GenerateFsm::RecomputeAfterFailedMigration(const std::string& why, Actions* a) {
  LOG(WARNING) << "[" << id_ << "] moving the stream failed (" << why
               << "); recomputing it on another decode worker";
  AbandonMigration(a);
  if (env_.metrics != nullptr) env_.metrics->CountMigration(/*moved=*/false);
  if (decode_active_) {
    // The target's reservation never got its KV; its blocks come back once
    // the stream is torn down there.
    a->cancel_decode = decode_;
    decode_active_ = false;
    release_wait_until_ = Now() + retry_.failover_wait;
    released_on_ = decode_worker_.address;
  }
  reads_paused_ = false;
  if (DeadlinePassed()) {
    Fail(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                      absl::StrCat("deadline exceeded while moving the stream (", why, ")")),
         a);
    return;
  }
  if (failovers_ >= retry_.decode_failovers) {
    Fail(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      absl::StrCat("moving the stream failed after ", relay_->completion_tokens(),
                                   " tokens (", why, ") and the decode failover budget of ",
                                   retry_.decode_failovers, " is used up")),
         a);
    return;
  }
  ++failovers_;
  failover_wait_until_ = Now() + retry_.failover_wait;
  Place(a);
}

}  // namespace pdserve::router
