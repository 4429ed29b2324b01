// pdserve-prefill: flags -> PrefillWorkerConfig -> RunPrefillWorker().
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/base/program_flags.h"
#include "common/rpc/grpc_server.h"
#include "common/rpc/server_tls_flags.h"
#include "common/worker/engine_runtime_flags.h"
#include "glog/logging.h"
#include "prefill_worker/prefill_worker.h"

ABSL_FLAG(std::string, kv_secret_file, "",
          "Shared secret file of the KV data plane; both tiers need the same one ('' = off)");
ABSL_FLAG(std::string, model, "models/SmolLM2-135M-Instruct.Q4_1.gguf", "GGUF model path");
ABSL_FLAG(std::string, listen, "0.0.0.0:50061", "gRPC listen address");
ABSL_FLAG(std::string, worker_id, "", "Worker id in logs and WorkerInfo (default prefill-<pid>)");
ABSL_FLAG(std::string, kv_transport, "auto",
          "KV path to decode workers: auto (cuda_ipc when both KV caches are on GPUs of this "
          "node, else tcp), tcp, cuda_ipc, or nccl (GPUs on other nodes; never chosen by auto)");
ABSL_FLAG(int32_t, max_batch_tokens, 512, "Tokens per forward step (prefill chunk)");
ABSL_FLAG(int32_t, max_batch, 16, "Prompts per step");
ABSL_FLAG(int32_t, drain_timeout_ms, 30000, "Longest drain on SIGTERM");
ABSL_FLAG(int32_t, metrics_port, 0, "Prometheus /metrics HTTP port (0 = off, -1 = any free port)");
ABSL_FLAG(std::string, port_file, "",
          "Once serving, write the bound ports here (grpc=, metrics=, kv= lines): start with "
          "port 0 and read the real ones back");
ABSL_FLAG(bool, prefix_cache, true, "Reuse cached KV blocks of shared prompt prefixes");

int main(int argc, char** argv) {
  pdserve::BlockTerminationSignals();
  pdserve::InitProgramFlags(
      "pdserve-prefill --model=M.gguf [--listen=host:port] "
      "[--kv_transport=auto|tcp|cuda_ipc|nccl]");
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  pdserve::prefill::PrefillWorkerConfig c;
  c.model_path = absl::GetFlag(FLAGS_model);
  c.tls = pdserve::ServerTlsFilesFromFlags();
  c.kv_secret_file = absl::GetFlag(FLAGS_kv_secret_file);
  c.listen = absl::GetFlag(FLAGS_listen);
  c.worker_id = absl::GetFlag(FLAGS_worker_id);
  c.runtime = pdserve::EngineRuntimeFlagsFromFlags();
  c.kv_transport = absl::GetFlag(FLAGS_kv_transport);
  c.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  c.max_batch = absl::GetFlag(FLAGS_max_batch);
  c.drain_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_drain_timeout_ms));
  c.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  c.port_file = absl::GetFlag(FLAGS_port_file);
  c.prefix_cache = absl::GetFlag(FLAGS_prefix_cache);
  absl::Status s = pdserve::prefill::RunPrefillWorker(c);
  if (!s.ok()) {
    LOG(ERROR) << "pdserve-prefill: " << s;
    return 1;
  }
  return 0;
}
