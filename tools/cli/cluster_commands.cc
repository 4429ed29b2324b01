#include "tools/cli/cluster_commands.h"

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/request/sampling_proto.h"
#include "common/rpc/grpc_server.h"
#include "common/worker/speculation_flags.h"
#include "tools/cli/cli_flags.h"
#include "tools/cli/generate_client.h"
#include "tools/cli/local_cluster.h"

ABSL_FLAG(int32_t, prefill, 1, "up: prefill workers");
ABSL_FLAG(int32_t, decode, 1, "up: decode workers");
ABSL_FLAG(bool, colocated, false, "up: no prefill tier; decode workers prefill locally");
ABSL_FLAG(std::string, kv_transport, "auto",
          "up: the prefill workers' KV path (auto, tcp, cuda_ipc; see pdserve-prefill --help)");
ABSL_FLAG(int32_t, router_port, 50051, "up: router port on 127.0.0.1 (0 = any free port)");
ABSL_FLAG(std::string, http_listen, "0.0.0.0:8000",
          "up: host:port of the router's OpenAI-compatible HTTP API (none = off)");
ABSL_FLAG(std::string, log_dir, "/tmp/pdserve-up", "up: where each process logs");
ABSL_FLAG(bool, worker_metrics, false,
          "up: workers serve Prometheus /metrics on free ports, printed at start and written to "
          "--log_dir/<worker>.port");
ABSL_FLAG(std::string, demo_prompt, "",
          "up: stream an answer to this prompt once ready (a chat message unless --chat=false)");
ABSL_FLAG(int32_t, gen_timeout_ms, 120000, "generate: deadline");

namespace pdserve {
namespace {

// `prompt` as --chat and --system say, the way `pdserve run` reads them,
// so the same flags mean the same answer locally and through a router.
v1::GenerateRequest PromptRequest(const std::string& prompt) {
  v1::GenerateRequest req;
  if (absl::GetFlag(FLAGS_chat)) {
    const std::string system = absl::GetFlag(FLAGS_system);
    if (!system.empty()) {
      v1::ChatMessage* s = req.mutable_chat()->add_messages();
      s->set_role("system");
      s->set_content(system);
    }
    v1::ChatMessage* m = req.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content(prompt);
  } else {
    req.set_text(prompt);
  }
  req.set_max_tokens(absl::GetFlag(FLAGS_max_tokens));
  req.set_ignore_eos(absl::GetFlag(FLAGS_ignore_eos));
  *req.mutable_sampling() = ToProto(SamplingParamsFromFlags());
  return req;
}

absl::Status StreamAnswer(const std::string& router, const v1::GenerateRequest& req) {
  ASSIGN_OR_RETURN(ClientSecurity security, ClientSecurityFromFlags());
  GenerateClient client(router, std::move(security));
  ASSIGN_OR_RETURN(GenerateResult r,
                   client.Generate(req, absl::Milliseconds(absl::GetFlag(FLAGS_gen_timeout_ms)),
                                   [](const std::string& text) {
                                     std::fputs(text.c_str(), stdout);
                                     std::fflush(stdout);
                                   }));
  const v1::Timings& t = r.finished.timings();
  const v1::Placement& where = r.finished.placement();
  const std::string prefill_on =
      where.prefill_worker().empty() ? "" : absl::StrCat(" on ", where.prefill_worker());
  const std::string decode_on =
      where.decode_worker().empty() ? "" : absl::StrCat("; decode on ", where.decode_worker());
  std::fprintf(stderr,
               "\n[%d prompt + %d generated tokens; TTFT %.1f ms (prefill %s%s: queue %.1f, "
               "compute %.1f; kv %.1f ms, %llu bytes)%s; total %.1f ms]\n",
               r.finished.usage().prompt_tokens(), r.finished.usage().completion_tokens(),
               t.ttft_ms(), t.prefill_mode().c_str(), prefill_on.c_str(), t.prefill_queue_ms(),
               t.prefill_compute_ms(), t.kv_transfer_ms(),
               static_cast<unsigned long long>(t.kv_transfer_bytes()), decode_on.c_str(),
               t.e2e_ms());
  return absl::OkStatus();
}

}  // namespace

absl::Status UpCommand() {
  LocalClusterOptions o;
  o.bin_dir = SelfDir();
  o.model = absl::GetFlag(FLAGS_model);
  o.log_dir = absl::GetFlag(FLAGS_log_dir);
  o.prefill = absl::GetFlag(FLAGS_prefill);
  o.decode = absl::GetFlag(FLAGS_decode);
  o.colocated = absl::GetFlag(FLAGS_colocated);
  o.router_port = absl::GetFlag(FLAGS_router_port);
  o.router_http_listen = absl::GetFlag(FLAGS_http_listen);
  o.threads_per_worker = absl::GetFlag(FLAGS_threads);
  o.kv_blocks = absl::GetFlag(FLAGS_kv_blocks);
  o.extra_worker_flags.push_back("--device=" + absl::GetFlag(FLAGS_device));
  // Drain (finish in-flight requests) before Stop's SIGKILL, not after.
  o.extra_worker_flags.push_back(
      absl::StrCat("--drain_timeout_ms=", absl::ToInt64Milliseconds(LocalCluster::kWorkerDrain)));
  o.extra_worker_flags.push_back("--kv_dtype=" + absl::GetFlag(FLAGS_kv_dtype));
  o.extra_worker_flags.push_back(absl::StrCat("--block_size=", absl::GetFlag(FLAGS_block_size)));
  if (absl::GetFlag(FLAGS_cuda_graphs)) o.extra_worker_flags.push_back("--cuda_graphs");
  if (absl::GetFlag(FLAGS_worker_metrics)) o.extra_worker_flags.push_back("--metrics_port=-1");
  o.extra_prefill_flags.push_back("--kv_transport=" + absl::GetFlag(FLAGS_kv_transport));
  // Checked here so that a bad value fails `up` itself, not a child.
  ASSIGN_OR_RETURN(SpeculationOptions speculation, SpeculationOptionsFromFlags());
  o.extra_decode_flags.push_back(speculation.enabled ? "--speculative=true" : "--speculative=false");
  o.extra_decode_flags.push_back(absl::StrCat("--speculative_max_draft=", speculation.max_draft));
  o.extra_decode_flags.push_back(
      absl::StrCat("--speculative_max_step_rows=", speculation.max_step_rows));
  o.extra_decode_flags.push_back(
      absl::StrCat("--speculative_suffix_tokens=", speculation.suffix_cache_tokens));
  ASSIGN_OR_RETURN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(o));
  GenerateClient client(cluster->router_address());
  // A worker that refuses the model exits at once: say so, with its reason,
  // instead of waiting out the router.
  const absl::Time ready_deadline = absl::Now() + absl::Seconds(60);
  while (true) {
    RETURN_IF_ERROR(cluster->CheckAlive());
    const absl::Status ready = client.WaitReady(absl::Seconds(1));
    if (ready.ok()) break;
    if (absl::Now() > ready_deadline) return ready;
  }
  std::fprintf(stderr, "pdserve: router listening on %s (%d prefill, %d decode%s); logs in %s\n",
               cluster->router_address().c_str(), o.colocated ? 0 : o.prefill, o.decode,
               o.colocated ? ", colocated" : "", o.log_dir.c_str());
  if (const std::string http = cluster->http_address(); !http.empty()) {
    // --chat=false is how a base model (no chat template) is run: it
    // refuses chat, so the hint uses plain completions.
    const bool chat = absl::GetFlag(FLAGS_chat);
    std::fprintf(stderr,
                 "pdserve: OpenAI-compatible API on http://%s/v1; try:\n"
                 "  curl http://%s/v1/%s -H 'Content-Type: application/json' \\\n"
                 "    -d '{%s, \"max_tokens\": 64}'\n",
                 http.c_str(), http.c_str(), chat ? "chat/completions" : "completions",
                 chat ? "\"messages\": [{\"role\": \"user\", \"content\": \"Hello!\"}]"
                      : "\"prompt\": \"Once upon a time\"");
  }
  if (absl::GetFlag(FLAGS_worker_metrics)) {
    std::vector<std::string> workers;
    for (int i = 0; i < (o.colocated ? 0 : o.prefill); ++i) workers.push_back(absl::StrCat("prefill-", i));
    for (int i = 0; i < o.decode; ++i) workers.push_back(absl::StrCat("decode-", i));
    for (const std::string& w : workers) {
      std::fprintf(stderr, "pdserve: %s metrics on http://127.0.0.1:%d/metrics\n", w.c_str(),
                   cluster->metrics_port(w));
    }
  }
  const std::string demo = absl::GetFlag(FLAGS_demo_prompt);
  if (!demo.empty()) {
    std::fprintf(stderr, "> %s\n", demo.c_str());
    RETURN_IF_ERROR(StreamAnswer(cluster->router_address(), PromptRequest(demo)));
  }
  std::fprintf(stderr, "pdserve: serving; press Ctrl-C to stop\n");
  // Supervise: a worker or router that dies comes back (same port), as a
  // Deployment's pod would; the router re-admits it once its load reports
  // resume.
  while (WaitForTerminationSignal(absl::Seconds(1)) == 0) {
    for (const std::string& event : cluster->Supervise(absl::Now())) {
      std::fprintf(stderr, "pdserve: %s\n", event.c_str());
    }
  }
  cluster->Stop();
  return absl::OkStatus();
}

absl::Status GenerateCommand(const std::vector<std::string>& args) {
  const std::string flag_prompt = absl::GetFlag(FLAGS_prompt);
  if (args.empty() == flag_prompt.empty()) {
    return absl::InvalidArgumentError(
        "usage: pdserve generate [flags] \"prompt\" (or --prompt=\"prompt\"; not both)");
  }
  const std::string prompt = args.empty() ? flag_prompt : absl::StrJoin(args, " ");
  return StreamAnswer(absl::GetFlag(FLAGS_router), PromptRequest(prompt));
}

}  // namespace pdserve
