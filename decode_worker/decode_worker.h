// DecodeWorker: the pdserve-decode process — the decode tier's wiring on a
// WorkerHost (model, KV cache, engine thread, servers, drain): the KV
// receiver, its advertised endpoint and accepted paths, and the
// DecodeWorker gRPC service, started together and drained together.
//
// Thread-safety: Start, Drain, ServeUntilTerminated and destruction from
// one thread; the accessors from any once started.
#ifndef PDSERVE_DECODE_WORKER_DECODE_WORKER_H_
#define PDSERVE_DECODE_WORKER_DECODE_WORKER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/engine/speculation.h"
#include "common/base/job_lane.h"
#include "common/base/periodic_task.h"
#include "common/kv/framed_kv_receiver.h"
#include "common/kv/framed_kv_sender.h"
#include "common/rpc/port_file.h"
#include "common/worker/worker_config.h"
#include "common/worker/worker_host.h"
#include "decode_worker/decode_context.h"
#include "decode_worker/decode_service.h"
#include "decode_worker/migration_drain.h"

namespace pdserve::decode {

// The shared fields (model, runtime, server, drain, metrics, port file,
// KV secret, prefix cache) are WorkerConfig's.
struct DecodeWorkerConfig : WorkerConfig {
  DecodeWorkerConfig() { listen = "0.0.0.0:50071"; }

  std::string kv_listen = "0.0.0.0:0";
  // Address the prefill workers use for KV; empty = derive from kv_listen
  // (127.0.0.1 when it listens on all interfaces).
  std::string kv_advertise;
  int max_batch_tokens = 512;
  int max_batch = 64;
  // Engine::Options::max_prefill_tokens_while_decoding: local prefill
  // chunks while other streams decode (0 = max_batch_tokens).
  int prefill_tokens_while_decoding = 0;
  absl::Duration kv_wait = absl::Seconds(10);
  // Speculative decoding: the default of requests that do not choose, and
  // its limits (common/engine/speculation.h).
  SpeculationOptions speculation;
  // Which streams a drain moves to other decode workers with their KV
  // (migration_drain.h).
  DrainMigration drain_migration = DrainMigration::kAuto;

  absl::Status Validate() const;
};

class DecodeWorker {
 public:
  static absl::StatusOr<std::unique_ptr<DecodeWorker>> Start(const DecodeWorkerConfig& config);
  ~DecodeWorker();

  int port() const { return host_->port(); }
  BoundPorts bound_ports() const;
  const std::string& kv_endpoint() const { return ctx_.kv_endpoint; }
  // Stops admitting, lets running sequences finish or moves them to other
  // decode workers (bounded by the drain timeout), then shuts the server
  // down. Returns whether every sequence was done or moved and every KV
  // block free before the timeout.
  bool Drain() { return host_->Drain(); }
  // Writes the port file, serves until SIGINT/SIGTERM, then drains.
  absl::Status ServeUntilTerminated() { return host_->ServeUntilTerminated(bound_ports()); }

 private:
  DecodeWorker() = default;

  // The model, runtime, engine thread and servers. Destroyed first, in
  // ~DecodeWorker: the service and context below outlive its server.
  std::unique_ptr<WorkerHost> host_;
  std::unique_ptr<FramedKvReceiver> receiver_;
  std::unique_ptr<FramedKvSender> sender_;  // migration pushes
  std::unique_ptr<JobLane> handoffs_;
  // Lapses migration offers nobody took (stream_migration.h).
  std::unique_ptr<PeriodicTask> offer_reaper_;
  DecodeContext ctx_;
  std::unique_ptr<DecodeService> service_;
};

// Runs a decode worker until SIGINT/SIGTERM, then drains.
absl::Status RunDecodeWorker(const DecodeWorkerConfig& config);

}  // namespace pdserve::decode

#endif  // PDSERVE_DECODE_WORKER_DECODE_WORKER_H_
