#include "router/worker_registry.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "grpcpp/grpcpp.h"

namespace pdserve {
namespace {

// A worker that restarts should be reachable again within seconds, not
// after gRPC's default reconnect backoff (up to two minutes); keepalives
// detect a peer that vanished without closing its connections.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

WorkerState InitialState(const std::string& address, v1::WorkerRole role) {
  WorkerState s;
  s.address = address;
  s.role = role;
  return s;
}

}  // namespace

WorkerRegistry::WorkerRegistry(const Options& options) {
  // Three missed reports plus slack before a silent worker counts as gone.
  current_.stale_after = 3 * options.load_interval + absl::Seconds(1);
  auto listener = [this](const WorkerState& s) { OnWorkerState(s); };
  auto add = [&](const std::string& address, v1::WorkerRole role) {
    std::shared_ptr<grpc::Channel> channel = MakeChannel(address);
    if (role == v1::WORKER_ROLE_DECODE) {
      decode_stubs_[address] = v1::DecodeWorker::NewStub(channel);
      current_.decode.push_back(InitialState(address, role));
    } else {
      prefill_stubs_[address] = v1::PrefillWorker::NewStub(channel);
      current_.prefill.push_back(InitialState(address, role));
    }
    WorkerWatcher::Options wo;
    wo.address = address;
    wo.role = role;
    wo.load_interval = options.load_interval;
    watchers_.push_back(std::make_unique<WorkerWatcher>(wo, std::move(channel), listener));
  };
  for (const std::string& a : options.decode_addresses) add(a, v1::WORKER_ROLE_DECODE);
  for (const std::string& a : options.prefill_addresses) add(a, v1::WORKER_ROLE_PREFILL);
  published_ = std::make_shared<const RegistrySnapshot>(current_);
}

WorkerRegistry::~WorkerRegistry() { Stop(); }

void WorkerRegistry::Start() {
  for (auto& w : watchers_) w->Start();
}

void WorkerRegistry::Stop() {
  for (auto& w : watchers_) w->Stop();
}

std::shared_ptr<const RegistrySnapshot> WorkerRegistry::snapshot() const {
  absl::MutexLock lock(&mu_);
  return published_;
}

v1::DecodeWorker::Stub* WorkerRegistry::decode_stub(const std::string& address) const {
  auto it = decode_stubs_.find(address);
  return it == decode_stubs_.end() ? nullptr : it->second.get();
}

v1::PrefillWorker::Stub* WorkerRegistry::prefill_stub(const std::string& address) const {
  auto it = prefill_stubs_.find(address);
  return it == prefill_stubs_.end() ? nullptr : it->second.get();
}

void WorkerRegistry::OnWorkerState(const WorkerState& state) {
  std::shared_ptr<const RegistrySnapshot> published;
  {
    absl::MutexLock lock(&mu_);
    auto& tier = state.role == v1::WORKER_ROLE_DECODE ? current_.decode : current_.prefill;
    auto it = std::find_if(tier.begin(), tier.end(),
                           [&](const WorkerState& w) { return w.address == state.address; });
    if (it == tier.end()) return;
    *it = state;
    published_ = std::make_shared<const RegistrySnapshot>(current_);
    published = published_;
  }
  if (listener_) listener_(*published);
}

}  // namespace pdserve
