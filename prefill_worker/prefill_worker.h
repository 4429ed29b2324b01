// PrefillWorker: the pdserve-prefill process — the prefill tier's wiring
// on a WorkerHost (model, KV cache, engine thread, servers, drain): the KV
// sender, the KV exporter as the engine's layer hook, admission with a
// warmed-up prefill rate, and the PrefillWorker gRPC service.
//
// Thread-safety: Start, Drain, ServeUntilTerminated and destruction from
// one thread; port() and bound_ports() from any once started.
#ifndef PDSERVE_PREFILL_WORKER_PREFILL_WORKER_H_
#define PDSERVE_PREFILL_WORKER_PREFILL_WORKER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/kv/framed_kv_sender.h"
#include "common/rpc/port_file.h"
#include "common/worker/worker_config.h"
#include "common/worker/worker_host.h"
#include "prefill_worker/prefill_context.h"
#include "prefill_worker/prefill_service.h"

namespace pdserve::prefill {

// The shared fields (model, runtime, server, drain, metrics, port file,
// KV secret, prefix cache) are WorkerConfig's.
struct PrefillWorkerConfig : WorkerConfig {
  PrefillWorkerConfig() { listen = "0.0.0.0:50061"; }

  // KV path to decode workers (common/kv/kv_path.h): auto, tcp or cuda_ipc.
  std::string kv_transport = "auto";
  int max_batch_tokens = 512;
  int max_batch = 16;
  int commit_threads = 4;

  absl::Status Validate() const;
};

class PrefillWorker {
 public:
  static absl::StatusOr<std::unique_ptr<PrefillWorker>> Start(const PrefillWorkerConfig& config);
  ~PrefillWorker();

  int port() const { return host_->port(); }
  BoundPorts bound_ports() const { return host_->bound_ports(); }
  void Drain() { host_->Drain(); }
  // Writes the port file, serves until SIGINT/SIGTERM, then drains.
  absl::Status ServeUntilTerminated() { return host_->ServeUntilTerminated(bound_ports()); }

 private:
  PrefillWorker() = default;

  // The model, runtime, engine thread and servers. Destroyed first, in
  // ~PrefillWorker: the service and context below outlive its server.
  std::unique_ptr<WorkerHost> host_;
  std::unique_ptr<FramedKvSender> sender_;
  std::unique_ptr<KvExporter> exporter_;
  PrefillContext ctx_;
  std::unique_ptr<PrefillService> service_;
};

absl::Status RunPrefillWorker(const PrefillWorkerConfig& config);

}  // namespace pdserve::prefill

#endif  // PDSERVE_PREFILL_WORKER_PREFILL_WORKER_H_
