#include "router/call/watchdog.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"

namespace pdserve::router {
namespace {

// How long `w` has sent no load report, when that is longer than
// `stale_after`. A worker that left the pool (DNS) may still finish its
// calls, and a load stream that is merely reconnecting, or an entry
// re-added (no report yet), says nothing about the worker.
std::optional<absl::Duration> Unreported(const WorkerState* w, absl::Duration stale_after,
                                         absl::Time now) {
  if (w == nullptr || w->last_report == absl::InfinitePast()) return std::nullopt;
  const absl::Duration unreported = now - w->last_report;
  if (unreported <= stale_after) return std::nullopt;
  return unreported;
}

std::string Ms(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

}  // namespace

absl::Duration Watchdog::Delay(absl::Duration stale_after, absl::Duration window,
                               bool kv_pending) {
  // The prefill worker reports every load_poll_ms; looking every sixteenth
  // of the window after that gives a stalled prefill up before the decode
  // worker's wait (4/3 of the window from the last frame) ends.
  if (!kv_pending || window <= absl::ZeroDuration()) return stale_after;
  return std::min(std::max(window / 16, absl::Milliseconds(50)), stale_after);
}

grpc::Status Watchdog::DecodeSilence(const RegistrySnapshot& snapshot, const std::string& address,
                                     absl::Time last_event, bool reads_paused, absl::Time now) {
  if (reads_paused) return grpc::Status::OK;
  const absl::Duration quiet = now - last_event;
  if (quiet <= snapshot.stale_after) return grpc::Status::OK;
  const std::optional<absl::Duration> unreported =
      Unreported(snapshot.FindDecode(address), snapshot.stale_after, now);
  if (!unreported.has_value()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      absl::StrCat("decode worker ", address, " went silent: no event for ",
                                   Ms(quiet), ", no load report for ", Ms(*unreported)));
}

grpc::Status Watchdog::PrefillSilence(const RegistrySnapshot& snapshot,
                                      const std::string& address, absl::Time now) {
  const std::optional<absl::Duration> unreported =
      Unreported(snapshot.FindPrefill(address), snapshot.stale_after, now);
  if (!unreported.has_value()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      absl::StrCat("prefill worker ", address, " went silent: no load report for ",
                                   Ms(*unreported)));
}

}  // namespace pdserve::router
