#include "decode_worker/migration_drain.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
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

// One round on the engine thread: offer what should move now, then say
// whether the engine is idle (no sequence, every block free, offered ones
// included). Asked there, not read from the published load: a stream
// admitted just before the drain began may not be in that yet.
// Returns false once the deadline passed without an answer.
bool OfferAndCheckIdle(DecodeContext* ctx, absl::Time offer_by, bool all, absl::Time deadline,
                       bool* idle) {
  struct Answer {
    absl::Notification done;
    bool idle = false;
  };
  auto answer = std::make_shared<Answer>();
  const bool posted = ctx->loop->Post([ctx, offer_by, all, answer](Engine& e) {
    OfferMigrations(ctx, e, offer_by, all);
    answer->idle = e.num_sequences() == 0 &&
                   e.cache().allocator().num_free() == e.cache().num_blocks();
    answer->done.Notify();
  });
  if (!posted || !answer->done.WaitForNotificationWithDeadline(deadline)) return false;
  *idle = answer->idle;
  return true;
}

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
    bool idle = false;
    if (!OfferAndCheckIdle(ctx, last_stretch, all, deadline, &idle) || idle) return;
    const absl::Time now = absl::Now();
    if (now >= deadline) return;
    absl::SleepFor(std::min(kPoll, deadline - now));
  }
}

}  // namespace pdserve::decode
