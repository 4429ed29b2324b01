#include "decode_worker/migration_drain.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "decode_worker/stream_migration.h"
#include "glog/logging.h"

namespace pdserve::decode {
namespace {

// The share of the window kept for moving the streams still running at
// its end, at most this long: a handoff takes milliseconds to a second.
constexpr int kLastStretchDivisor = 4;
constexpr absl::Duration kLastStretchMax = absl::Seconds(2);
constexpr absl::Duration kPoll = absl::Milliseconds(20);

}  // namespace

absl::StatusOr<DrainMigration> ParseDrainMigration(absl::string_view text) {
  if (text == "auto") return DrainMigration::kAuto;
  if (text == "all") return DrainMigration::kAll;
  if (text == "off") return DrainMigration::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("--drain_migration must be auto, all or off, not '", text, "'"));
}

void MigrateWhileDraining(DecodeContext* ctx, DrainMigration mode, absl::Time deadline) {
  if (mode == DrainMigration::kOff) return;
  const absl::Time start = absl::Now();
  const absl::Time last_stretch =
      deadline - std::min((deadline - start) / kLastStretchDivisor, kLastStretchMax);
  if (mode == DrainMigration::kAll) {
    LOG(INFO) << "draining: moving every stream to other decode workers";
  } else {
    LOG(INFO) << "draining: moving streams that will not finish by "
              << absl::FormatDuration(last_stretch - start) << " from now";
  }
  while (true) {
    const bool all = mode == DrainMigration::kAll || absl::Now() >= last_stretch;
    ctx->loop->Post(
        [ctx, last_stretch, all](Engine& e) { OfferMigrations(ctx, e, last_stretch, all); });
    if (ctx->loop->WaitIdle(std::min(deadline, absl::Now() + kPoll))) return;
    if (absl::Now() >= deadline) return;
  }
}

}  // namespace pdserve::decode
