#include "common/rpc/grpc_server.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
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

bool AwaitGrpcShutdown(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  struct Poll {
    absl::Notification done;
    std::atomic<bool> shut_down{false};
  };
  auto poll = std::make_shared<Poll>();
  // grpc_is_initialized() is false once the last reference is released
  // and the cleanup that follows (which joins gRPC's threads) is over: the
  // cleanup holds the lock that call takes. So a cleanup that hangs would
  // block the caller too; the polling runs on a thread of its own, which
  // is abandoned at the deadline, so exit is delayed by `timeout` at most.
  std::thread([poll, deadline] {
    bool initialized = grpc_is_initialized() != 0;
    while (initialized && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
      initialized = grpc_is_initialized() != 0;
    }
    poll->shut_down = !initialized;
    poll->done.Notify();
  }).detach();
  // A little past the deadline, for the poll in progress at it.
  if (!poll->done.WaitForNotificationWithDeadline(deadline + absl::Milliseconds(100))) {
    return false;
  }
  return poll->shut_down;
}

void AwaitGrpcShutdownBeforeExit() {
  constexpr absl::Duration kTimeout = absl::Seconds(5);
  if (!AwaitGrpcShutdown(kTimeout)) {
    LOG(WARNING) << "gRPC did not shut down within " << absl::FormatDuration(kTimeout)
                 << "; exiting anyway";
  }
}

}  // namespace pdserve
