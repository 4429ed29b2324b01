#include "prefill_worker/prefill_worker.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/base/status_macros.h"
#include "common/kv/kv_path.h"
#include "common/rpc/port_file.h"
#include "common/runtime/runtime_factory.h"
#include "common/worker/worker_drain.h"
#include "glog/logging.h"
#include "prefill_worker/prefill_metrics.h"

namespace pdserve::prefill {
namespace {

constexpr int32_t kWarmUpTokens = 128;

// One prefill before serving, so that admission (PrefillAdmission) has a
// measured prefill rate when the first burst of prompts arrives. Skipped
// when the pool or context is too small for it; never cached.
void WarmUp(EngineLoop& loop, const ModelConfig& model, const KvCache& cache) {
  const int32_t pool_tokens = (cache.num_blocks() - 1) * cache.layout().block_size;
  const int32_t n = std::min({kWarmUpTokens, pool_tokens, model.context_length - 1});
  if (n < kMinRateSampleTokens) return;
  SequenceOptions o;
  for (int32_t i = 0; i < n; ++i) o.prompt.push_back((i * 7919 + 13) % model.n_vocab);
  o.max_tokens = 1;
  o.ignore_eos = true;
  o.use_prefix_cache = false;
  const absl::Time start = absl::Now();
  // Done once a closure posted after the warm-up's step has run: the loop
  // publishes its load (and rate) between the two.
  auto ended = std::make_shared<absl::Notification>();
  auto published = std::make_shared<absl::Notification>();
  loop.Post([o = std::move(o), ended](Engine& e) {
    auto on_event = [ended](const TokenEvent& ev) {
      if (ev.finish != FinishReason::kNone && !ended->HasBeenNotified()) ended->Notify();
    };
    if (absl::StatusOr<int64_t> id = e.Add(o, on_event); !id.ok()) {
      LOG(WARNING) << "prefill warm-up not run: " << id.status();
      ended->Notify();
    }
  });
  if (ended->WaitForNotificationWithTimeout(absl::Seconds(60))) {
    loop.Post([published](Engine&) { published->Notify(); });
    published->WaitForNotificationWithTimeout(absl::Seconds(10));
  }
  LOG(INFO) << "warm-up: " << n << " prompt tokens in "
            << absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(1)))
            << ", prefill rate " << static_cast<int64_t>(loop.load().prefill_tokens_per_s)
            << " tokens/s";
}

}  // namespace

absl::Status PrefillWorkerConfig::Validate() const {
  if (model_path.empty()) return absl::InvalidArgumentError("--model is required");
  RETURN_IF_ERROR(runtime.Validate());
  const DeviceSpec spec = *DeviceSpec::Parse(runtime.device);  // checked just above
  absl::StatusOr<KvTransportFlag> transport = ParseKvTransportFlag(kv_transport);
  if (!transport.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv_transport: ", transport.status().message()));
  }
  if ((*transport == KvTransportFlag::kCudaIpc || *transport == KvTransportFlag::kNccl) &&
      !spec.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv_transport=", kv_transport, " needs --device=cuda"));
  }
  if (max_batch_tokens < 1 || max_batch < 1 || commit_threads < 1) {
    return absl::InvalidArgumentError(
        "--max_batch_tokens, --max_batch and --commit_threads must be positive");
  }
  return ValidateMetricsPort(metrics_port);
}

absl::StatusOr<std::unique_ptr<PrefillWorker>> PrefillWorker::Start(const PrefillWorkerConfig& c) {
  RETURN_IF_ERROR(c.Validate());
  std::unique_ptr<PrefillWorker> w(new PrefillWorker);
  w->config_ = c;
  ASSIGN_OR_RETURN(w->model_, Model::Load(c.model_path));
  ASSIGN_OR_RETURN(EngineRuntime rt, CreateEngineRuntime(*w->model_, c.runtime));
  w->cache_ = std::move(rt.cache);
  w->runner_ = std::move(rt.runner);
  FramedKvSenderOptions kv_options;
  ASSIGN_OR_RETURN(kv_options.auth, LoadKvAuthKey(c.kv_secret_file));
  ASSIGN_OR_RETURN(w->ctx_.kv_transport, ParseKvTransportFlag(c.kv_transport));
  w->ctx_.kv_local = {w->cache_->on_device(), LocalKvHostId(),
                      w->cache_->on_device() && w->cache_->device_memory()->SupportsPeerChannels()};
  // Device paths (CUDA IPC, NCCL) read the pool, unless forced to tcp.
  if (w->cache_->on_device() && w->ctx_.kv_transport != KvTransportFlag::kTcp) {
    kv_options.device_pool = w->cache_.get();
  }
  ASSIGN_OR_RETURN(w->sender_, FramedKvSender::Create(kv_options));
  w->ctx_.sender = w->sender_.get();
  w->exporter_ = std::make_unique<KvExporter>(w->sender_.get(), w->cache_.get(), c.commit_threads);
  KvExporter* exporter = w->exporter_.get();
  Engine::Options eo{.max_batch_tokens = c.max_batch_tokens, .max_running = c.max_batch};
  eo.prefix_cache = c.prefix_cache;
  std::atomic<uint64_t>* progress = &w->ctx_.prefill_progress;
  eo.on_layer_done = [exporter, progress](int layer,
                                          const std::vector<Engine::LayerChunk>& chunks) {
    uint64_t tokens = 0;
    for (const Engine::LayerChunk& c : chunks) tokens += c.n_tokens;
    progress->fetch_add(tokens, std::memory_order_relaxed);
    exporter->OnLayer(layer, chunks);
  };
  auto engine =
      std::make_unique<Engine>(&w->model_->tokenizer(), w->runner_.get(), w->cache_.get(), eo);
  w->loop_ = std::make_unique<EngineLoop>(std::move(engine));
  w->exporter_->AttachLoop(w->loop_.get());
  w->ctx_.admission.set_step_tokens(c.max_batch_tokens);
  WarmUp(*w->loop_, w->model_->config(), *w->cache_);
  w->ctx_.model = w->model_.get();
  w->ctx_.loop = w->loop_.get();
  w->ctx_.exporter = exporter;
  w->ctx_.layout = w->cache_->layout();
  w->ctx_.worker_id = c.worker_id.empty() ? absl::StrCat("prefill-", getpid()) : c.worker_id;
  w->service_ = std::make_unique<PrefillService>(&w->ctx_);
  if (c.metrics_port != 0) {
    RegisterPrefillMetrics(&w->ctx_, &w->metrics_);
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
  LOG(INFO) << "prefill worker " << w->ctx_.worker_id << " serving on port " << w->port()
            << ", prefix cache " << (c.prefix_cache ? "on" : "off");
  return w;
}

BoundPorts PrefillWorker::bound_ports() const {
  return {.grpc = port(), .metrics = metrics_server_ ? metrics_server_->port() : 0};
}

void PrefillWorker::Drain() { DrainWorker(ctx_.draining, *server_, *loop_, config_.drain_timeout); }

// No more scrapes (they read the loop), no more calls, then no more engine
// steps (no more sends), then the exporter's commit threads, then the
// sender they use.
PrefillWorker::~PrefillWorker() {
  metrics_server_.reset();
  if (server_) server_->Shutdown(absl::ZeroDuration());
  if (loop_) loop_->Stop();
  exporter_.reset();
  sender_.reset();
  loop_.reset();
}

absl::Status RunPrefillWorker(const PrefillWorkerConfig& config) {
  ASSIGN_OR_RETURN(std::unique_ptr<PrefillWorker> worker, PrefillWorker::Start(config));
  RETURN_IF_ERROR(WritePortFile(config.port_file, worker->bound_ports()));
  WaitForTerminationSignal();
  worker->Drain();
  return absl::OkStatus();
}

}  // namespace pdserve::prefill
