// pdserve-prefill: flags -> PrefillWorkerConfig -> RunPrefillWorker().
// The flags both tiers share are common/worker/worker_flags.h's.
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/base/program_flags.h"
#include "common/rpc/grpc_server.h"
#include "common/worker/worker_flags.h"
#include "glog/logging.h"
#include "prefill_worker/prefill_worker.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:50061", "gRPC listen address");
ABSL_FLAG(std::string, worker_id, "", "Worker id in logs and WorkerInfo (default prefill-<pid>)");
ABSL_FLAG(std::string, kv_transport, "auto",
          "KV path to decode workers: auto (cuda_ipc when both KV caches are on GPUs of this "
          "node, else tcp), tcp, cuda_ipc, or nccl (GPUs on other nodes; never chosen by auto)");
ABSL_FLAG(int32_t, max_batch_tokens, 512, "Tokens per forward step (prefill chunk)");
ABSL_FLAG(int32_t, max_batch, 16, "Prompts per step");

int main(int argc, char** argv) {
  pdserve::BlockTerminationSignals();
  pdserve::InitProgramFlags(
      "pdserve-prefill --model=M.gguf [--listen=host:port] "
      "[--kv_transport=auto|tcp|cuda_ipc|nccl]");
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  pdserve::prefill::PrefillWorkerConfig c;
  pdserve::WorkerConfigFromFlags(&c);
  c.listen = absl::GetFlag(FLAGS_listen);
  c.worker_id = absl::GetFlag(FLAGS_worker_id);
  c.kv_transport = absl::GetFlag(FLAGS_kv_transport);
  c.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  c.max_batch = absl::GetFlag(FLAGS_max_batch);
  absl::Status s = pdserve::prefill::RunPrefillWorker(c);
  if (!s.ok()) {
    LOG(ERROR) << "pdserve-prefill: " << s;
    return 1;
  }
  return 0;
}
