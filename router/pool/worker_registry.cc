#include "router/pool/worker_registry.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/base/host_port.h"
#include "glog/logging.h"
#include "grpcpp/grpcpp.h"

namespace pdserve::router {
namespace {

// A worker that restarts should be reachable again within seconds, not
// after gRPC's default reconnect backoff (up to two minutes); keepalives
// detect a peer that vanished without closing its connections.
// A DNS target's addresses are pod IPs, while a tier's certificate names
// its Service (one certificate for every pod of the tier): the handshake
// checks `tls_name`, the DNS name the router was given, as gRPC's own dns:///
// resolver would.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const std::string& tls_name,
                                           std::shared_ptr<grpc::ChannelCredentials> creds) {
  grpc::ChannelArguments args;
  if (!tls_name.empty()) args.SetSslTargetNameOverride(tls_name);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Back pressure: a stream the router stops reading (its client does not
  // read) fills an 8 KiB window, not one that BDP probing grew to
  // megabytes, so the decode worker's outbox backs up within a few hundred
  // tokens and pauses the sequence. Token events are tens of bytes; the
  // largest reply (a load report's block keys) takes a few window updates.
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 8 * 1024);
  return grpc::CreateCustomChannel(
      address, creds != nullptr ? std::move(creds) : grpc::InsecureChannelCredentials(), args);
}

WorkerState InitialState(const std::string& address, v1::WorkerRole role) {
  WorkerState s;
  s.address = address;
  s.role = role;
  return s;
}

const char* RoleName(v1::WorkerRole role) {
  return role == v1::WORKER_ROLE_PREFILL ? "prefill" : "decode";
}

}  // namespace

WorkerRegistry::WorkerRegistry(const Options& options)
    : load_interval_(options.load_interval),
      dns_refresh_(options.dns_refresh),
      credentials_(options.credentials),
      resolver_(options.resolver ? options.resolver : DnsResolver(ResolveWithGetAddrInfo)) {
  decode_.role = v1::WORKER_ROLE_DECODE;
  prefill_.role = v1::WORKER_ROLE_PREFILL;
  {
    absl::MutexLock lock(&mu_);
    // Three missed reports plus slack before a silent worker counts as gone.
    current_.stale_after = 3 * load_interval_ + absl::Seconds(1);
    published_ = std::make_shared<const RegistrySnapshot>(current_);
  }
  AddTargets(options.decode_addresses, &decode_);
  AddTargets(options.prefill_addresses, &prefill_);
}

WorkerRegistry::~WorkerRegistry() { Stop(); }

void WorkerRegistry::AddTargets(const std::vector<std::string>& targets, Tier* tier) {
  for (const std::string& text : targets) {
    absl::StatusOr<WorkerTarget> target = ParseWorkerTarget(text);
    if (!target.ok()) {
      LOG(ERROR) << "ignoring " << RoleName(tier->role) << " target: " << target.status();
    } else if (target->dns) {
      tier->dns.push_back(DnsTarget{*target, {}, false});
    } else {
      tier->static_addresses.push_back(target->Canonical());
    }
  }
  // Static workers are in the very first snapshot, as they always were.
  Reconcile(tier);
}

void WorkerRegistry::Start() {
  started_ = true;
  for (Tier* tier : {&decode_, &prefill_}) {
    for (auto& [address, watcher] : tier->watchers) watcher->Start();
  }
  if (!decode_.dns.empty() || !prefill_.dns.empty()) {
    refresh_thread_ = std::thread([this] { RefreshLoop(); });
  }
}

void WorkerRegistry::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (refresh_thread_.joinable()) refresh_thread_.join();
  // Watchers are added only by the constructor and the refresh thread.
  for (Tier* tier : {&decode_, &prefill_}) {
    for (auto& [address, watcher] : tier->watchers) watcher->Stop();
  }
}

std::shared_ptr<const RegistrySnapshot> WorkerRegistry::snapshot() const {
  absl::MutexLock lock(&mu_);
  return published_;
}

std::shared_ptr<v1::DecodeWorker::Stub> WorkerRegistry::decode_stub(
    const std::string& address) const {
  absl::MutexLock lock(&mu_);
  auto it = decode_stubs_.find(address);
  return it == decode_stubs_.end() ? nullptr : it->second;
}

std::shared_ptr<v1::PrefillWorker::Stub> WorkerRegistry::prefill_stub(
    const std::string& address) const {
  absl::MutexLock lock(&mu_);
  auto it = prefill_stubs_.find(address);
  return it == prefill_stubs_.end() ? nullptr : it->second;
}

void WorkerRegistry::Reconcile(Tier* tier) {
  absl::flat_hash_set<std::string> wanted(tier->static_addresses.begin(),
                                          tier->static_addresses.end());
  for (const DnsTarget& dns : tier->dns) wanted.insert(dns.addresses.begin(), dns.addresses.end());
  std::vector<std::string> gone;
  for (const auto& [address, watcher] : tier->watchers) {
    if (!wanted.contains(address)) gone.push_back(address);
  }
  for (const std::string& address : gone) RemoveWorker(address, tier);
  // In configuration order, so a static list keeps its order in snapshots.
  for (const std::string& address : tier->static_addresses) {
    if (!tier->watchers.contains(address)) AddWorker(address, "", started_, tier);
  }
  for (const DnsTarget& dns : tier->dns) {
    for (const std::string& address : dns.addresses) {
      if (!tier->watchers.contains(address)) AddWorker(address, dns.target.host, started_, tier);
    }
  }
}

void WorkerRegistry::AddWorker(const std::string& address, const std::string& tls_name, bool start,
                               Tier* tier) {
  std::shared_ptr<grpc::Channel> channel = MakeChannel(address, tls_name, credentials_);
  std::shared_ptr<const RegistrySnapshot> published;
  {
    absl::MutexLock lock(&mu_);
    if (tier->role == v1::WORKER_ROLE_DECODE) {
      decode_stubs_[address] = v1::DecodeWorker::NewStub(channel);
      current_.decode.push_back(InitialState(address, tier->role));
    } else {
      prefill_stubs_[address] = v1::PrefillWorker::NewStub(channel);
      current_.prefill.push_back(InitialState(address, tier->role));
    }
    published = PublishLocked();
  }
  WorkerWatcher::Options wo;
  wo.address = address;
  wo.role = tier->role;
  wo.load_interval = load_interval_;
  auto watcher = std::make_unique<WorkerWatcher>(
      wo, std::move(channel), [this](const WorkerState& s) { OnWorkerState(s); });
  if (start) watcher->Start();
  tier->watchers[address] = std::move(watcher);
  Notify(published);
}

void WorkerRegistry::RemoveWorker(const std::string& address, Tier* tier) {
  std::shared_ptr<const RegistrySnapshot> published;
  {
    absl::MutexLock lock(&mu_);
    // Requests already placed there hold their own stub (and channel).
    std::vector<WorkerState>* states;
    if (tier->role == v1::WORKER_ROLE_DECODE) {
      decode_stubs_.erase(address);
      states = &current_.decode;
    } else {
      prefill_stubs_.erase(address);
      states = &current_.prefill;
    }
    states->erase(std::remove_if(states->begin(), states->end(),
                                 [&](const WorkerState& w) { return w.address == address; }),
                  states->end());
    published = PublishLocked();
  }
  // After the snapshot dropped it: whatever the watcher reports while it
  // stops is ignored (OnWorkerState finds no such worker).
  tier->watchers[address]->Stop();
  tier->watchers.erase(address);
  LOG(INFO) << RoleName(tier->role) << " worker " << address << " left the pool";
  Notify(published);
}

void WorkerRegistry::Resolve(DnsTarget* dns) {
  const std::string name = dns->target.Canonical();
  absl::StatusOr<std::vector<std::string>> ips = resolver_(dns->target.host);
  if (ips.ok() && ips->empty()) ips = absl::UnavailableError("no addresses");
  if (!ips.ok()) {
    // Keep the last known set; log the first failure of a streak only.
    LOG_IF(WARNING, !dns->failing)
        << "resolving " << name << " failed (keeping " << dns->addresses.size()
        << " known addresses): " << ips.status();
    dns->failing = true;
    return;
  }
  LOG_IF(INFO, dns->failing) << "resolving " << name << " works again";
  dns->failing = false;
  std::vector<std::string> addresses;
  for (const std::string& ip : *ips) addresses.push_back(FormatHostPort(ip, dns->target.port));
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  if (addresses == dns->addresses) return;
  LOG(INFO) << name << " resolves to " << addresses.size()
            << " addresses: " << absl::StrJoin(addresses, ", ");
  dns->addresses = std::move(addresses);
}

void WorkerRegistry::RefreshLoop() {
  do {
    for (Tier* tier : {&decode_, &prefill_}) {
      if (tier->dns.empty()) continue;
      for (DnsTarget& dns : tier->dns) Resolve(&dns);
      Reconcile(tier);
    }
  } while (SleepUnlessStopped(dns_refresh_));
}

bool WorkerRegistry::SleepUnlessStopped(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  const absl::Time until = absl::Now() + d;
  while (!stopping_ && absl::Now() < until) {
    mu_.AwaitWithDeadline(absl::Condition(&stopping_), until);
  }
  return !stopping_;
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
    published = PublishLocked();
  }
  Notify(published);
}

std::shared_ptr<const RegistrySnapshot> WorkerRegistry::PublishLocked() {
  published_ = std::make_shared<const RegistrySnapshot>(current_);
  return published_;
}

void WorkerRegistry::Notify(const std::shared_ptr<const RegistrySnapshot>& published) {
  if (listener_) listener_(*published);
}

}  // namespace pdserve::router
