#include "router/router_server.h"

#include <csignal>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"

namespace pdserve {
namespace {

constexpr char kServiceName[] = "pdserve.v1.Generation";

}  // namespace

absl::StatusOr<std::unique_ptr<RouterServer>> RouterServer::Start(const RouterConfig& config) {
  RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<RouterServer> s(new RouterServer(config));
  ASSIGN_OR_RETURN(s->model_, Model::Load(config.model_path, {.tokenizer_only = true}));

  WorkerRegistry::Options ro;
  ro.decode_addresses = config.decode_addresses;
  ro.prefill_addresses = config.prefill_addresses;
  ro.load_interval = absl::Milliseconds(config.load_poll_ms);
  s->registry_ = std::make_unique<WorkerRegistry>(ro);
  s->service_ = std::make_unique<GenerationService>(*s->model_, s->config_, s->registry_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.listen, grpc::InsecureServerCredentials(), &s->port_);
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config.listen));
  }
  RouterServer* raw = s.get();
  s->UpdateHealth(*s->registry_->snapshot());
  s->registry_->set_change_listener([raw](const RegistrySnapshot& snap) { raw->UpdateHealth(snap); });
  s->registry_->Start();
  LOG(INFO) << "pdserve-router listening on port " << s->port_ << " ("
            << config.decode_addresses.size() << " decode, " << config.prefill_addresses.size()
            << " prefill workers configured; policies decode="
            << PolicyKindName(config.decode_policy)
            << " prefill=" << PolicyKindName(config.prefill_policy) << ")";
  return s;
}

RouterServer::~RouterServer() { Shutdown(absl::ZeroDuration()); }

void RouterServer::UpdateHealth(const RegistrySnapshot& snapshot) {
  bool serving = false;
  const absl::Time now = absl::Now();
  for (const WorkerState& w : snapshot.decode) {
    serving |= IsUsable(w, snapshot.stale_after, now) &&
               w.info.model_fingerprint() == model_->fingerprint();
  }
  if (serving_.exchange(serving ? 1 : 0) == (serving ? 1 : 0)) return;
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  LOG(INFO) << "health: " << (serving ? "SERVING" : "NOT_SERVING");
  health->SetServingStatus(serving);
  health->SetServingStatus(kServiceName, serving);
}

void RouterServer::Shutdown(absl::Duration grace) {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  LOG(INFO) << "router draining: " << service_->calls_in_flight() << " requests in flight";
  if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
    health->Shutdown();
  }
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  // Client RPCs to workers may outlive the server-side calls by a moment.
  service_->WaitForCalls();
  registry_->Stop();
  server_->Wait();
  LOG(INFO) << "router stopped";
}

absl::Status Run(const RouterConfig& config) {
  // Block the signals before any thread starts so that only sigwait sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ASSIGN_OR_RETURN(std::unique_ptr<RouterServer> server, RouterServer::Start(config));
  int signal = 0;
  sigwait(&signals, &signal);
  LOG(INFO) << "received signal " << signal << "; draining for up to "
            << config.drain_timeout_ms << " ms";
  server->Shutdown(absl::Milliseconds(config.drain_timeout_ms));
  return absl::OkStatus();
}

}  // namespace pdserve
