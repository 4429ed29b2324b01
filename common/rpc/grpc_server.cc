#include "common/rpc/grpc_server.h"

#include <signal.h>

#include <chrono>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pdserve {

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const GrpcServerOptions& options) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen_address,
                           options.credentials != nullptr ? options.credentials
                                                          : grpc::InsecureServerCredentials(),
                           &port);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  // gRPC listens with SO_REUSEPORT by default: a second process on a taken
  // port would start "fine" and the kernel would split new connections
  // between the two (a stale worker beside its restarted copy silently
  // takes half the traffic). A taken port must fail the start instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  for (grpc::Service* s : options.services) builder.RegisterService(s);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen_address));
  }
  auto out = std::unique_ptr<GrpcServer>(new GrpcServer(std::move(server), port));
  out->SetServing(true);
  return out;
}

GrpcServer::~GrpcServer() { Shutdown(absl::ZeroDuration()); }

void GrpcServer::SetServing(bool serving) {
  if (server_->GetHealthCheckService() != nullptr) {
    server_->GetHealthCheckService()->SetServingStatus(serving);
  }
}

void GrpcServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  SetServing(false);
  server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
  server_->Wait();
}

void BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

namespace {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

int WaitForTerminationSignal() {
  const sigset_t set = TerminationSignals();
  int sig = 0;
  sigwait(&set, &sig);
  LOG(INFO) << "received signal " << sig << ", draining";
  return sig;
}

int WaitForTerminationSignal(absl::Duration timeout) {
  const sigset_t set = TerminationSignals();
  const timespec ts = absl::ToTimespec(timeout);
  const int sig = sigtimedwait(&set, nullptr, &ts);
  if (sig <= 0) return 0;  // timed out (EAGAIN) or interrupted (EINTR)
  LOG(INFO) << "received signal " << sig << ", draining";
  return sig;
}

}  // namespace pdserve
