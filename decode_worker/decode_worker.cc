#include "decode_worker/decode_worker.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/base/host_port.h"
#include "common/base/status_macros.h"
#include "common/kv/kv_path.h"
#include "common/rpc/port_file.h"
#include "common/runtime/runtime_factory.h"
#include "common/worker/worker_drain.h"
#include "decode_worker/decode_metrics.h"
#include "glog/logging.h"

namespace pdserve::decode {

absl::Status DecodeWorkerConfig::Validate() const {
  if (model_path.empty()) return absl::InvalidArgumentError("--model is required");
  RETURN_IF_ERROR(runtime.Validate());
  if (max_batch_tokens < 1 || max_batch < 1) {
    return absl::InvalidArgumentError("--max_batch_tokens and --max_batch must be positive");
  }
  if (prefill_tokens_while_decoding < 0) {
    return absl::InvalidArgumentError("--prefill_tokens_while_decoding must be >= 0");
  }
  if (kv_wait <= absl::ZeroDuration())
    return absl::InvalidArgumentError("--kv_wait_ms must be positive");
  return ValidateMetricsPort(metrics_port);
}

namespace {

std::string AdvertisedKvEndpoint(const DecodeWorkerConfig& c, uint16_t port) {
  if (!c.kv_advertise.empty()) return c.kv_advertise;
  std::string host = "127.0.0.1";
  if (auto hp = ParseHostPort(c.kv_listen); hp.ok() && hp->host != "0.0.0.0" && !hp->host.empty()) {
    host = hp->host;
  }
  return absl::StrCat(host, ":", port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DecodeWorker>> DecodeWorker::Start(const DecodeWorkerConfig& c) {
  RETURN_IF_ERROR(c.Validate());
  std::unique_ptr<DecodeWorker> w(new DecodeWorker);
  w->config_ = c;
  ASSIGN_OR_RETURN(w->model_, Model::Load(c.model_path));
  ASSIGN_OR_RETURN(EngineRuntime rt, CreateEngineRuntime(*w->model_, c.runtime));
  w->cache_ = std::move(rt.cache);
  w->runner_ = std::move(rt.runner);
  FramedKvReceiverOptions ro;
  ro.listen_address = c.kv_listen;
  ASSIGN_OR_RETURN(ro.auth, LoadKvAuthKey(c.kv_secret_file));
  ASSIGN_OR_RETURN(w->receiver_, FramedKvReceiver::Create(w->cache_.get(), ro));
  auto engine = std::make_unique<Engine>(
      &w->model_->tokenizer(), w->runner_.get(), w->cache_.get(),
      Engine::Options{.max_batch_tokens = c.max_batch_tokens,
                      .max_running = c.max_batch,
                      .max_prefill_tokens_while_decoding = c.prefill_tokens_while_decoding,
                      .prefix_cache = c.prefix_cache});
  w->loop_ = std::make_unique<EngineLoop>(std::move(engine));
  w->ctx_.model = w->model_.get();
  w->ctx_.loop = w->loop_.get();
  w->ctx_.receiver = w->receiver_.get();
  w->ctx_.layout = w->cache_->layout();
  w->ctx_.worker_id = c.worker_id.empty() ? absl::StrCat("decode-", getpid()) : c.worker_id;
  w->ctx_.kv_endpoint = AdvertisedKvEndpoint(c, w->receiver_->port());
  w->ctx_.kv_transports = AcceptedKvTransports(
      w->cache_->on_device(),
      w->cache_->on_device() && w->cache_->device_memory()->SupportsPeerChannels());
  w->ctx_.kv_host_id = LocalKvHostId();
  w->ctx_.default_kv_wait = c.kv_wait;
  w->service_ = std::make_unique<DecodeService>(&w->ctx_);
  if (c.metrics_port != 0) {
    RegisterDecodeMetrics(&w->ctx_, &w->metrics_);
    MetricsHttpServerOptions mo;
    mo.listen_address = MetricsListenAddress(c.metrics_port);
    ASSIGN_OR_RETURN(w->metrics_server_, MetricsHttpServer::Start(mo, &w->metrics_));
  }
  GrpcServerOptions so;
  so.listen_address = c.listen;
  so.services = {w->service_.get()};
  ASSIGN_OR_RETURN(so.credentials, MakeServerCredentials(c.tls));
  ASSIGN_OR_RETURN(w->server_, GrpcServer::Start(so));
  // A lost device ends admission for good: health turns NOT_SERVING and
  // load reports say draining, so the router places work elsewhere.
  w->loop_->OnRunnerLost([ctx = &w->ctx_, server = w->server_.get()](const absl::Status&) {
    ctx->draining.store(true);
    server->SetServing(false);
  });
  LOG(INFO) << "decode worker " << w->ctx_.worker_id << " serving on port " << w->port()
            << ", kv endpoint " << w->ctx_.kv_endpoint << ", " << c.runtime.kv_blocks
            << " blocks of " << c.runtime.block_size << " tokens (" << c.runtime.kv_dtype
            << "), prefix cache " << (c.prefix_cache ? "on" : "off");
  return w;
}

BoundPorts DecodeWorker::bound_ports() const {
  return {.grpc = port(),
          .metrics = metrics_server_ ? metrics_server_->port() : 0,
          .kv = receiver_->port()};
}

void DecodeWorker::Drain() { DrainWorker(ctx_.draining, *server_, *loop_, config_.drain_timeout); }

// Teardown order: no more scrapes (they read the loop and receiver), no
// more calls (server), then no more engine work, then the receiver (its
// callbacks post to the loop), then memory.
DecodeWorker::~DecodeWorker() {
  metrics_server_.reset();
  if (server_) server_->Shutdown(absl::ZeroDuration());
  if (loop_) loop_->Stop();
  receiver_.reset();
  loop_.reset();
}

absl::Status RunDecodeWorker(const DecodeWorkerConfig& config) {
  ASSIGN_OR_RETURN(std::unique_ptr<DecodeWorker> worker, DecodeWorker::Start(config));
  RETURN_IF_ERROR(WritePortFile(config.port_file, worker->bound_ports()));
  WaitForTerminationSignal();
  worker->Drain();
  return absl::OkStatus();
}

}  // namespace pdserve::decode
