// MigrateWhileDraining: the decode tier's drain hook (worker_drain.h).
// Streams that will not finish in the drain window move to other decode
// workers with their KV instead of being cut (stream_migration.h). Which
// ones, by --drain_migration:
//   auto  at once, those whose own pace says they would not finish before
//         the last stretch of the window; in that stretch, every one still
//         running (the default)
//   all   every stream, at once: the shortest drain
//   off   none: the window's end cuts them, and the router recomputes them
// Offers that lapse end their streams, and the router recomputes them
// elsewhere. Returns once the engine is idle (every block back, offers
// included) or at the deadline.
#ifndef PDSERVE_DECODE_WORKER_MIGRATION_DRAIN_H_
#define PDSERVE_DECODE_WORKER_MIGRATION_DRAIN_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "decode_worker/decode_context.h"

namespace pdserve::decode {

enum class DrainMigration { kAuto, kAll, kOff };

// "auto", "all", "off"; INVALID_ARGUMENT otherwise.
absl::StatusOr<DrainMigration> ParseDrainMigration(absl::string_view text);

void MigrateWhileDraining(DecodeContext* ctx, DrainMigration mode, absl::Time deadline);

}  // namespace pdserve::decode

#endif  // PDSERVE_DECODE_WORKER_MIGRATION_DRAIN_H_
