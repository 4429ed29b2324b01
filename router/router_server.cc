#include "router/router_server.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/grammar/tokenizer_vocab.h"
#include "common/rpc/port_file.h"
#include "common/tls/reloading_tls_context.h"
#include "glog/logging.h"

namespace pdserve::router {

absl::StatusOr<std::unique_ptr<RouterServer>> RouterServer::Start(const RouterConfig& config) {
  RETURN_IF_ERROR(config.Validate());
  const absl::Duration attempt = config.retry_options().prefill_attempt_timeout;
  if (absl::Milliseconds(config.prefill_attempt_timeout_ms) > attempt) {
    LOG(WARNING) << "--prefill_attempt_timeout_ms=" << config.prefill_attempt_timeout_ms
                 << " capped to " << absl::FormatDuration(attempt)
                 << " (3/4 of --kv_wait_ms, so a stalled prefill is replaced before the decode "
                    "worker stops waiting)";
  }
  std::unique_ptr<RouterServer> s(new RouterServer(config));
  ASSIGN_OR_RETURN(s->model_, ModelCard::Load(config.model_path));
  LOG(INFO) << "model card '" << s->model_->config().name << "' from " << config.model_path
            << ": vocab=" << s->model_->tokenizer().vocab_size() << ", fingerprint "
            << s->model_->fingerprint();

  WorkerRegistry::Options ro;
  ro.decode_addresses = config.decode_addresses;
  ro.prefill_addresses = config.prefill_addresses;
  ro.load_interval = absl::Milliseconds(config.load_poll_ms);
  ro.dns_refresh = absl::Milliseconds(config.dns_refresh_ms);
  ASSIGN_OR_RETURN(ro.credentials, MakeChannelCredentials(config.worker_tls));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> server_credentials,
                   MakeServerCredentials(config.tls));
  s->registry_ = std::make_unique<WorkerRegistry>(ro);
  // Structured output: constraints are compiled at admission, so a bad one
  // is refused before any worker does work.
  ASSIGN_OR_RETURN(s->grammars_,
                   NewGrammarCompiler(s->model_->tokenizer(), s->model_->config().n_vocab));
  s->service_ = std::make_unique<GenerationService>(*s->model_, s->config_, s->registry_.get(),
                                                    &s->metrics_, s->grammars_.get());
  if (!config.auth_token_file.empty()) {
    ASSIGN_OR_RETURN(BearerAuth auth,
                     BearerAuth::Load(config.auth_token_file, config.tls.reload_interval));
    s->service_->EnableAuth(std::move(auth));
  }

  if (config.metrics_port != 0) {
    MetricsHttpServerOptions mo;
    mo.listen_address = MetricsListenAddress(config.metrics_port);
    mo.ready = [router = s.get()] { return router->serving_.load() == 1; };
    ASSIGN_OR_RETURN(s->metrics_server_, MetricsHttpServer::Start(mo, &s->metrics_registry_));
  }
  GrpcServerOptions so;
  so.listen_address = config.listen;
  so.services = {s->service_.get()};
  so.credentials = std::move(server_credentials);
  ASSIGN_OR_RETURN(s->server_, GrpcServer::Start(so));
  s->port_ = s->server_->port();
  if (config.http_enabled()) RETURN_IF_ERROR(s->StartHttp());
  RouterServer* raw = s.get();
  s->UpdateHealth(*s->registry_->snapshot());
  s->registry_->set_change_listener(
      [raw](const RegistrySnapshot& snap) { raw->UpdateHealth(snap); });
  s->registry_->Start();
  LOG(INFO) << "pdserve-router listening on port " << s->port_ << " ("
            << config.decode_addresses.size() << " decode, " << config.prefill_addresses.size()
            << " prefill targets configured; policies decode="
            << PolicyKindName(config.decode_policy)
            << " prefill=" << PolicyKindName(config.prefill_policy) << "; "
            << DescribeServerTls(config.tls)
            << (config.auth_token_file.empty() ? ", no auth" : ", bearer tokens")
            << (s->http_ ? absl::StrCat("; HTTP API on port ", s->http_->port()) : "")
            << "; to workers: " << (config.worker_tls.ca.empty() ? "insecure" : "TLS") << ")";
  return s;
}

absl::Status RouterServer::StartHttp() {
  openai::OpenAiFrontOptions o;
  o.http.listen_address = config_.http_listen;
  o.http.thread_name = "openai-http";
  o.http.read_timeout = absl::Milliseconds(config_.http_read_timeout_ms);
  o.http.max_body_bytes = static_cast<size_t>(config_.http_max_body_bytes);
  if (!config_.tls.cert.empty()) {
    ASSIGN_OR_RETURN(o.http.tls,
                     ReloadingTlsContext::Load({config_.tls.cert, config_.tls.key, config_.tls.ca,
                                                config_.tls.reload_interval}));
  }
  o.model_name = config_.ModelName();
  o.ready = [this] { return serving_.load() == 1; };
  o.count_refused = [this](grpc::StatusCode code) { metrics_.CountRequest(code, Api::kOpenAi); };
  ASSIGN_OR_RETURN(http_, openai::OpenAiFront::Start(std::move(o), *service_, model_->tokenizer()));
  return absl::OkStatus();
}

RouterServer::~RouterServer() { Shutdown(absl::ZeroDuration()); }

void RouterServer::UpdateHealth(const RegistrySnapshot& snapshot) {
  bool serving = !config_.ready_needs_decode;
  const absl::Time now = absl::Now();
  uint64_t blocks = 0, blocks_free = 0;
  for (const WorkerState& w : snapshot.decode) {
    if (!IsUsable(w, snapshot.stale_after, now) ||
        w.info.model_fingerprint() != model_->fingerprint()) {
      continue;
    }
    serving = true;
    blocks += w.load.kv_blocks_total();
    blocks_free += std::min(w.load.kv_blocks_free(), w.load.kv_blocks_total());
  }
  // No usable decode worker is a full pool for whoever reads the gauge: an
  // endpoint picker or autoscaler must not see room that is not there.
  metrics_.SetDecodeKvUtilization(
      blocks == 0 ? 1.0 : static_cast<double>(blocks - blocks_free) / static_cast<double>(blocks));
  if (draining_.load()) return;
  if (serving_.exchange(serving ? 1 : 0) == (serving ? 1 : 0)) return;
  if (draining_.load()) {  // Shutdown began meanwhile: it stays not ready
    serving_.store(0);
    return;
  }
  LOG(INFO) << "health: " << (serving ? "SERVING" : "NOT_SERVING");
  server_->SetServing(serving);
}

void RouterServer::Shutdown(absl::Duration grace) {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  // New requests by either door are refused from here on.
  service_->StopAdmitting();
  // Not ready from here on (/readyz, the HTTP API), as gRPC health is about
  // to say; load reports still arriving must not turn it back.
  draining_.store(true);
  serving_.store(0);
  LOG(INFO) << "router draining: " << service_->calls_in_flight() << " requests in flight";
  const absl::Time deadline = absl::Now() + grace;
  // Stops accepting, lets calls run for `grace`, then cancels them.
  server_->Shutdown(grace);
  // The HTTP API's calls get what is left of the grace; closing its
  // connections then cancels the rest.
  service_->WaitForCalls(deadline);
  http_.reset();
  // A call's RPCs to workers may outlive its client's end by a moment.
  service_->WaitForCalls();
  registry_->Stop();
  LOG(INFO) << "router stopped";
}

namespace {

// Serves until SIGTERM or SIGINT, drains, and destroys the server (and with
// it every gRPC object the router owns) before returning.
absl::Status Serve(const RouterConfig& config) {
  ASSIGN_OR_RETURN(std::unique_ptr<RouterServer> server, RouterServer::Start(config));
  RETURN_IF_ERROR(WritePortFile(
      config.port_file,
      {.grpc = server->port(), .metrics = server->metrics_port(), .http = server->http_port()}));
  WaitForTerminationSignal();
  server->Shutdown(absl::Milliseconds(config.drain_timeout_ms));
  return absl::OkStatus();
}

}  // namespace

absl::Status Run(const RouterConfig& config) {
  BlockTerminationSignals();
  const absl::Status status = Serve(config);
  // The server is gone, but not necessarily gRPC: the last channel to a
  // worker can be released on a gRPC thread a moment later, and the library
  // then shuts down there while main() already runs exit().
  AwaitGrpcShutdownBeforeExit();
  return status;
}

}  // namespace pdserve::router
