#include "prefill_worker/prefill_worker.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/base/status_macros.h"
#include "common/kv/kv_auth.h"
#include "common/kv/kv_path.h"
#include "common/rpc/grpc_server.h"
#include "common/runtime/device_spec.h"
#include "common/worker/kv_tls_context.h"
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
  if (kv_tls && *transport == KvTransportFlag::kNccl) {
    // NCCL moves the bytes over its own sockets, outside the TLS connection.
    return absl::InvalidArgumentError(
        "--kv_tls encrypts the TCP KV plane; --kv_transport=nccl would send KV outside it");
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
  ASSIGN_OR_RETURN(w->host_, WorkerHost::Load(c, "prefill"));
  KvCache* cache = w->host_->cache();
  FramedKvSenderOptions kv_options;
  ASSIGN_OR_RETURN(kv_options.auth, LoadKvAuthKey(c.kv_secret_file));
  ASSIGN_OR_RETURN(kv_options.tls, KvTlsContext(c));
  ASSIGN_OR_RETURN(w->ctx_.kv_transport, ParseKvTransportFlag(c.kv_transport));
  w->ctx_.kv_local = {cache->on_device(), LocalKvHostId(),
                      cache->on_device() && cache->device_memory()->SupportsPeerChannels()};
  // Device paths (CUDA IPC, NCCL) read the pool, unless forced to tcp.
  if (cache->on_device() && w->ctx_.kv_transport != KvTransportFlag::kTcp) {
    kv_options.device_pool = cache;
  }
  ASSIGN_OR_RETURN(w->sender_, FramedKvSender::Create(kv_options));
  w->ctx_.sender = w->sender_.get();
  w->exporter_ = std::make_unique<KvExporter>(w->sender_.get(), cache, c.commit_threads);
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
  EngineLoop* loop = w->host_->StartEngine(eo);
  w->exporter_->AttachLoop(loop);
  w->ctx_.admission.set_step_tokens(c.max_batch_tokens);
  WarmUp(*loop, w->host_->model().config(), *cache);
  w->ctx_.model = &w->host_->model();
  w->ctx_.grammars = w->host_->grammars();
  w->ctx_.loop = loop;
  w->ctx_.exporter = exporter;
  w->ctx_.layout = cache->layout();
  w->ctx_.worker_id = w->host_->worker_id();
  w->service_ = std::make_unique<PrefillService>(&w->ctx_);
  const PrefillContext* ctx = &w->ctx_;
  RETURN_IF_ERROR(w->host_->Serve(w->service_.get(), &w->ctx_.draining,
                                  [ctx](MetricsRegistry* registry) {
                                    RegisterPrefillMetrics(ctx, registry);
                                  }));
  LOG(INFO) << "prefill worker " << w->ctx_.worker_id << " serving on port " << w->port()
            << ", prefix cache " << (c.prefix_cache ? "on" : "off");
  return w;
}

// No more scrapes, calls or engine steps (no more sends), then the
// exporter's commit threads, then the sender they use, then the host's
// engine thread, runtime and model.
PrefillWorker::~PrefillWorker() {
  if (host_) host_->Stop();
  exporter_.reset();
  sender_.reset();
  host_.reset();
}

absl::Status RunPrefillWorker(const PrefillWorkerConfig& config) {
  absl::Status status;
  {
    // A start-up that fails part way may have started gRPC too (TLS
    // credentials), so the wait below covers that path as well.
    absl::StatusOr<std::unique_ptr<PrefillWorker>> worker = PrefillWorker::Start(config);
    status = worker.ok() ? (*worker)->ServeUntilTerminated() : worker.status();
  }
  // gRPC may still be shutting down on one of its own threads (TLS state
  // outliving OpenSSL's cleanup otherwise; AwaitGrpcShutdown).
  AwaitGrpcShutdownBeforeExit();
  return status;
}

}  // namespace pdserve::prefill
