#include "decode_worker/decode_worker.h"

#include "absl/strings/str_cat.h"
#include "common/base/host_port.h"
#include "common/base/status_macros.h"
#include "common/kv/kv_auth.h"
#include "common/kv/kv_path.h"
#include "common/rpc/grpc_server.h"
#include "common/worker/kv_tls_context.h"
#include "decode_worker/decode_metrics.h"
#include "decode_worker/stream_migration.h"
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

// Concurrent migration pushes: each waits on the network, not the CPU.
constexpr int kHandoffThreads = 4;

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
  ASSIGN_OR_RETURN(w->host_, WorkerHost::Load(c, "decode"));
  KvCache* cache = w->host_->cache();
  FramedKvReceiverOptions ro;
  ro.listen_address = c.kv_listen;
  ASSIGN_OR_RETURN(ro.auth, LoadKvAuthKey(c.kv_secret_file));
  ASSIGN_OR_RETURN(ro.tls, KvTlsContext(c));
  ASSIGN_OR_RETURN(w->receiver_, FramedKvReceiver::Create(cache, ro));
  // Migration pushes KV to other decode workers as a prefill worker would.
  FramedKvSenderOptions so;
  so.auth = ro.auth;
  so.tls = ro.tls;
  if (cache->on_device()) so.device_pool = cache;
  ASSIGN_OR_RETURN(w->sender_, FramedKvSender::Create(so));
  w->handoffs_ = std::make_unique<JobLane>(kHandoffThreads);
  EngineLoop* loop = w->host_->StartEngine(
      Engine::Options{.max_batch_tokens = c.max_batch_tokens,
                      .max_running = c.max_batch,
                      .max_prefill_tokens_while_decoding = c.prefill_tokens_while_decoding,
                      .prefix_cache = c.prefix_cache,
                      .speculation = c.speculation});
  w->ctx_.model = &w->host_->model();
  w->ctx_.grammars = w->host_->grammars();
  w->ctx_.loop = loop;
  w->ctx_.receiver = w->receiver_.get();
  w->ctx_.cache = cache;
  w->ctx_.sender = w->sender_.get();
  w->ctx_.handoffs = w->handoffs_.get();
  w->ctx_.kv_local = {cache->on_device(), LocalKvHostId(),
                      cache->on_device() && cache->device_memory()->SupportsPeerChannels()};
  w->ctx_.layout = cache->layout();
  w->ctx_.worker_id = w->host_->worker_id();
  w->ctx_.kv_endpoint = AdvertisedKvEndpoint(c, w->receiver_->port());
  w->ctx_.kv_transports = AcceptedKvTransports(
      cache->on_device(), cache->on_device() && cache->device_memory()->SupportsPeerChannels());
  w->ctx_.kv_host_id = LocalKvHostId();
  w->ctx_.default_kv_wait = c.kv_wait;
  w->ctx_.drain_moves_all = c.drain_migration == DrainMigration::kAll;
  w->service_ = std::make_unique<DecodeService>(&w->ctx_);
  DecodeContext* migrating = &w->ctx_;
  const DrainMigration mode = c.drain_migration;
  w->host_->SetDrainHook([migrating, mode](absl::Time deadline) {
    MigrateWhileDraining(migrating, mode, deadline);
  });
  w->offer_reaper_ = std::make_unique<PeriodicTask>(absl::Seconds(1), [migrating] {
    migrating->loop->Post([migrating](Engine& e) { ExpireOffers(migrating, e); });
  });
  const DecodeContext* ctx = &w->ctx_;
  RETURN_IF_ERROR(w->host_->Serve(w->service_.get(), &w->ctx_.draining,
                                  [ctx](MetricsRegistry* registry) {
                                    RegisterDecodeMetrics(ctx, registry);
                                  }));
  LOG(INFO) << "decode worker " << w->ctx_.worker_id << " serving on port " << w->port()
            << ", kv endpoint " << w->ctx_.kv_endpoint << ", "
            << (c.runtime.kv_memory_fraction > 0 ? cache->num_blocks() : c.runtime.kv_blocks)
            << " blocks of " << c.runtime.block_size << " tokens (" << c.runtime.kv_dtype
            << "), prefix cache " << (c.prefix_cache ? "on" : "off") << ", speculative decoding "
            << (c.speculation.enabled ? "on" : "off") << " by default";
  return w;
}

BoundPorts DecodeWorker::bound_ports() const {
  BoundPorts ports = host_->bound_ports();
  ports.kv = receiver_->port();
  return ports;
}

// Teardown order: no more scrapes (they read the loop and receiver), no
// more calls (server), then no more engine work, then the receiver (its
// callbacks post to the loop), then the host's engine thread, runtime and
// model.
DecodeWorker::~DecodeWorker() {
  offer_reaper_.reset();  // it posts to the engine thread
  if (host_) host_->Stop();
  handoffs_.reset();  // pushes still running end (bounded by their deadline)
  sender_.reset();
  receiver_.reset();
  host_.reset();
}

absl::Status RunDecodeWorker(const DecodeWorkerConfig& config) {
  absl::Status status;
  {
    // A start-up that fails part way may have started gRPC too (TLS
    // credentials), so the wait below covers that path as well.
    absl::StatusOr<std::unique_ptr<DecodeWorker>> worker = DecodeWorker::Start(config);
    status = worker.ok() ? (*worker)->ServeUntilTerminated() : worker.status();
  }
  // gRPC may still be shutting down on one of its own threads (TLS state
  // outliving OpenSSL's cleanup otherwise; AwaitGrpcShutdown).
  AwaitGrpcShutdownBeforeExit();
  return status;
}

}  // namespace pdserve::decode
