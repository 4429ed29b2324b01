#include "router/call/prefill_attempts.h"

#include "absl/strings/str_cat.h"

namespace pdserve::router {

int PrefillAttempts::Begin(const std::string& address, uint64_t progress, absl::Time now) {
  addresses_.push_back(address);
  started_ = now;
  progress_ = progress;
  progress_at_ = now;
  in_flight_ = true;
  ok_ = false;
  return current();
}

void PrefillAttempts::End(const grpc::Status& status, const v1::PrefillResponse& response) {
  in_flight_ = false;
  ok_ = status.ok();
  if (ok_) response_ = response;
}

void PrefillAttempts::Abandon() {
  in_flight_ = false;
  ok_ = false;
}

void PrefillAttempts::CountRetry(const std::string& address) {
  ++retries_;
  failed_.push_back(address);
}

PrefillAttempts::InFlight PrefillAttempts::Stop() {
  InFlight stopped;
  if (in_flight_) stopped.prefill = current();
  in_flight_ = false;
  stopped.transfer_retry = transfer_retry_;
  transfer_retry_.reset();
  return stopped;
}

grpc::Status PrefillAttempts::Stall(const WorkerState* w, absl::Duration window, absl::Time now) {
  if (window <= absl::ZeroDuration()) return grpc::Status::OK;
  if (w != nullptr && w->load.prefill_progress() != progress_) {
    progress_ = w->load.prefill_progress();
    progress_at_ = now;
    return grpc::Status::OK;
  }
  const absl::Duration still = now - progress_at_;
  if (still < window) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                      absl::StrCat("prefill worker ", address(), " computed no prompt token for ",
                                   absl::FormatDuration(absl::Trunc(still, absl::Milliseconds(1))),
                                   " (--prefill_attempt_timeout_ms)"));
}

}  // namespace pdserve::router
