// pdserve-decode: flags -> DecodeWorkerConfig -> RunDecodeWorker().
// The flags both tiers share are common/worker/worker_flags.h's.
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/time.h"
#include "common/base/program_flags.h"
#include "common/rpc/grpc_server.h"
#include "common/worker/speculation_flags.h"
#include "common/worker/worker_flags.h"
#include "decode_worker/decode_worker.h"
#include "glog/logging.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:50071", "gRPC listen address");
ABSL_FLAG(std::string, kv_listen, "0.0.0.0:0", "KV receiver listen address (port 0 = any)");
ABSL_FLAG(std::string, kv_advertise, "", "KV endpoint told to prefill workers (host:port)");
ABSL_FLAG(std::string, worker_id, "", "Worker id in logs and WorkerInfo (default decode-<pid>)");
ABSL_FLAG(int32_t, max_batch_tokens, 512, "Tokens per forward step (local prefill chunk)");
ABSL_FLAG(int32_t, max_batch, 64, "Sequences per decode batch");
ABSL_FLAG(int32_t, prefill_tokens_while_decoding, 0,
          "Most prompt tokens a step prefills locally while other sequences decode: bounds their "
          "longest inter-token gap, at the price of more gaps (0 = --max_batch_tokens)");
ABSL_FLAG(int32_t, kv_wait_ms, 10000, "Default wait for a reservation's KV commit");
ABSL_FLAG(std::string, drain_migration, "auto",
          "On SIGTERM, move streams to other decode workers with their KV: auto (those that "
          "would not finish in --drain_timeout_ms), all (every one, at once), off (none: the "
          "window's end cuts them and the router recomputes them)");

int main(int argc, char** argv) {
  pdserve::BlockTerminationSignals();
  pdserve::InitProgramFlags(
      "pdserve-decode --model=M.gguf [--listen=host:port] [--kv_listen=host:port] "
      "[--kv_advertise=host:port]");
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  pdserve::decode::DecodeWorkerConfig c;
  pdserve::WorkerConfigFromFlags(&c);
  c.listen = absl::GetFlag(FLAGS_listen);
  c.kv_listen = absl::GetFlag(FLAGS_kv_listen);
  c.kv_advertise = absl::GetFlag(FLAGS_kv_advertise);
  c.worker_id = absl::GetFlag(FLAGS_worker_id);
  c.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  c.max_batch = absl::GetFlag(FLAGS_max_batch);
  c.prefill_tokens_while_decoding = absl::GetFlag(FLAGS_prefill_tokens_while_decoding);
  c.kv_wait = absl::Milliseconds(absl::GetFlag(FLAGS_kv_wait_ms));
  absl::StatusOr<pdserve::SpeculationOptions> speculation = pdserve::SpeculationOptionsFromFlags();
  if (!speculation.ok()) {
    LOG(ERROR) << "pdserve-decode: " << speculation.status();
    return 1;
  }
  c.speculation = *speculation;
  absl::StatusOr<pdserve::decode::DrainMigration> drain_migration =
      pdserve::decode::ParseDrainMigration(absl::GetFlag(FLAGS_drain_migration));
  if (!drain_migration.ok()) {
    LOG(ERROR) << "pdserve-decode: " << drain_migration.status();
    return 1;
  }
  c.drain_migration = *drain_migration;
  absl::Status s = pdserve::decode::RunDecodeWorker(c);
  if (!s.ok()) {
    LOG(ERROR) << "pdserve-decode: " << s;
    return 1;
  }
  return 0;
}
