#include "router/pool/worker_watcher.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"
#include "grpcpp/grpcpp.h"
#include "pdserve/v1/worker.grpc.pb.h"
#include "router/pool/worker_pairing.h"

namespace pdserve::router {

class WorkerWatcher::ControlStub {
 public:
  virtual ~ControlStub() = default;
  virtual grpc::Status GetInfo(grpc::ClientContext* ctx, v1::WorkerInfo* info) = 0;
  virtual std::unique_ptr<grpc::ClientReaderInterface<v1::LoadReport>> WatchLoad(
      grpc::ClientContext* ctx, const v1::WatchLoadRequest& request) = 0;
};

namespace {

template <typename Service>
class ControlStubFor : public WorkerWatcher::ControlStub {
 public:
  explicit ControlStubFor(std::shared_ptr<grpc::Channel> channel)
      : stub_(Service::NewStub(std::move(channel))) {}

  grpc::Status GetInfo(grpc::ClientContext* ctx, v1::WorkerInfo* info) override {
    return stub_->GetInfo(ctx, v1::GetInfoRequest(), info);
  }
  std::unique_ptr<grpc::ClientReaderInterface<v1::LoadReport>> WatchLoad(
      grpc::ClientContext* ctx, const v1::WatchLoadRequest& request) override {
    return stub_->WatchLoad(ctx, request);
  }

 private:
  std::unique_ptr<typename Service::Stub> stub_;
};

const char* RoleName(v1::WorkerRole role) {
  return role == v1::WORKER_ROLE_PREFILL ? "prefill" : "decode";
}

}  // namespace

WorkerWatcher::WorkerWatcher(Options options, std::shared_ptr<grpc::Channel> channel,
                             Listener listener)
    : options_(std::move(options)), listener_(std::move(listener)) {
  if (options_.role == v1::WORKER_ROLE_PREFILL) {
    stub_ = std::make_unique<ControlStubFor<v1::PrefillWorker>>(std::move(channel));
  } else {
    stub_ = std::make_unique<ControlStubFor<v1::DecodeWorker>>(std::move(channel));
  }
  state_.address = options_.address;
  state_.role = options_.role;
}

WorkerWatcher::~WorkerWatcher() { Stop(); }

void WorkerWatcher::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void WorkerWatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (in_flight_ != nullptr) in_flight_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

void WorkerWatcher::Loop() {
  absl::Duration backoff = options_.min_backoff;
  bool reported_down = false;
  while (true) {
    bool delivered = false;
    const absl::Status why = RunSession(&delivered);
    if (state_.live) {
      state_.live = false;
      Publish();
    }
    if (delivered) {
      backoff = options_.min_backoff;
      reported_down = false;
    }
    if (Stopping()) return;
    // Log the first failure of an outage, not every retry.
    if (!reported_down) {
      LOG(WARNING) << RoleName(options_.role) << " worker " << options_.address
                   << " is not serving: " << why << "; retrying with backoff";
      reported_down = true;
    }
    // Jitter keeps a fleet of routers from reconnecting in lockstep.
    if (!Sleep(backoff * absl::Uniform(bitgen_, 0.8, 1.2))) return;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

absl::Status WorkerWatcher::RunSession(bool* delivered) {
  absl::Status handshake = Handshake();
  if (!handshake.ok()) return handshake;
  grpc::ClientContext ctx;
  if (!Arm(&ctx)) return absl::CancelledError("stopping");
  v1::WatchLoadRequest request;
  request.set_interval_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(options_.load_interval)));
  std::unique_ptr<grpc::ClientReaderInterface<v1::LoadReport>> reader =
      stub_->WatchLoad(&ctx, request);
  v1::LoadReport report;
  while (reader->Read(&report)) {
    if (!state_.live) {
      LOG(INFO) << RoleName(options_.role) << " worker " << options_.address << " is live ("
                << state_.info.worker_id() << ", fingerprint " << state_.info.model_fingerprint()
                << ", kv layout " << FormatKvLayout(state_.info.kv_layout()) << ", protocol "
                << state_.info.protocol_version() << ")";
    }
    state_.live = true;
    state_.load = report;
    state_.last_report = absl::Now();
    *delivered = true;
    Publish();
  }
  const grpc::Status status = reader->Finish();
  Disarm();
  if (*delivered && !Stopping()) {
    LOG(WARNING) << RoleName(options_.role) << " worker " << options_.address
                 << " load stream ended: " << FromGrpcStatus(status);
  }
  return status.ok() ? absl::UnavailableError("load stream ended") : FromGrpcStatus(status);
}

absl::Status WorkerWatcher::Handshake() {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   absl::ToChronoMilliseconds(options_.handshake_timeout));
  if (!Arm(&ctx)) return absl::CancelledError("stopping");
  v1::WorkerInfo info;
  const grpc::Status status = stub_->GetInfo(&ctx, &info);
  Disarm();
  if (!status.ok()) return FromGrpcStatus(status);
  if (info.role() != options_.role && info.role() != v1::WORKER_ROLE_UNSPECIFIED) {
    return absl::FailedPreconditionError(absl::StrCat("configured as a ", RoleName(options_.role),
                                                      " worker but reports role ",
                                                      v1::WorkerRole_Name(info.role())));
  }
  state_.info = std::move(info);
  state_.has_info = true;
  return absl::OkStatus();
}

void WorkerWatcher::Publish() { listener_(state_); }

bool WorkerWatcher::Arm(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  in_flight_ = ctx;
  return true;
}

void WorkerWatcher::Disarm() {
  absl::MutexLock lock(&mu_);
  in_flight_ = nullptr;
}

bool WorkerWatcher::Stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool WorkerWatcher::Sleep(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  const absl::Time until = absl::Now() + d;
  while (!stopping_ && absl::Now() < until) {
    mu_.AwaitWithDeadline(absl::Condition(&stopping_), until);
  }
  return !stopping_;
}

}  // namespace pdserve::router
