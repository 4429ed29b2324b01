// pdserve_migration_bench: the stall a client sees when its decode worker
// drains (SIGTERM: a rolling update, a scale-in) — KV migration against a
// recompute failover (docs/PERFORMANCE.md, "Drain: migration vs
// recompute").
//
// For each context length and each mode it starts a local cluster of two
// decode workers (colocated: they prefill locally), streams one greedy
// request whose prompt has that many tokens, SIGTERMs the decode worker
// serving it after --tokens_before tokens, and reports the longest gap
// between two tokens after the signal (the handover), next to the same
// request's longest gap undisturbed, and whether the tokens equal the
// undisturbed run's. Migration (--drain_migration=all): the stream moves
// with its KV at once. Recompute (--drain_migration=off, and
// --decode_migration=false on the router): the stream runs on for the
// drain window, is cut, and the other worker prefills prompt + generated
// tokens.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "pdserve/v1/generation.grpc.pb.h"
#include "tools/bench/split_mix64.h"
#include "tools/cli/local_cluster.h"

ABSL_FLAG(std::string, model, "models/SmolLM2-135M-Instruct.Q4_1.gguf", "GGUF model");
ABSL_FLAG(std::string, bin_dir, "build/bin", "Where pdserve-{router,decode} are");
ABSL_FLAG(std::string, log_dir, "/tmp/pdserve-migration-bench", "Process logs");
ABSL_FLAG(std::string, contexts, "256,2048,6144", "Prompt lengths, in tokens");
ABSL_FLAG(int32_t, tokens_before, 16, "Tokens streamed before the SIGTERM");
ABSL_FLAG(int32_t, max_tokens, 512, "Tokens per request (the stream must outlast the window)");
ABSL_FLAG(int32_t, drain_ms, 200, "The decode workers' --drain_timeout_ms");
ABSL_FLAG(int32_t, threads, 1, "Threads per decode worker");

namespace pdserve {
namespace {

struct Run {
  grpc::Status status;
  std::vector<int32_t> ids;
  std::vector<double> gaps_ms;  // between token chunks, after the signal (or all)
  v1::Finished finished;
  double max_gap() const { return gaps_ms.empty() ? 0 : *std::max_element(gaps_ms.begin(), gaps_ms.end()); }
  // Chunks often arrive back to back (the router writes what it has), so
  // the mean says the stream's pace better than a median of gaps.
  double mean_gap() const {
    double sum = 0;
    for (double g : gaps_ms) sum += g;
    return gaps_ms.empty() ? 0 : sum / static_cast<double>(gaps_ms.size());
  }
};

v1::GenerateRequest Request(int context) {
  v1::GenerateRequest r;
  SplitMix64 rng(static_cast<uint64_t>(context));
  // Ordinary vocabulary ids (SmolLM2: 49152), away from the special ones.
  for (int i = 0; i < context; ++i) r.mutable_tokens()->add_ids(rng.Between(300, 40000));
  r.set_max_tokens(absl::GetFlag(FLAGS_max_tokens));
  r.set_ignore_eos(true);
  r.set_return_token_ids(true);
  return r;
}

// Streams `req`; once `signal_after` tokens arrived (0: never), SIGTERMs
// the decode worker serving it.
Run Stream(LocalCluster& cluster, const v1::GenerateRequest& req, int signal_after) {
  auto stub = v1::Generation::NewStub(
      grpc::CreateChannel(cluster.router_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
  auto reader = stub->Generate(&ctx, req);
  v1::GenerateResponse msg;
  Run run;
  std::string serving;
  absl::Time last = absl::InfinitePast();
  bool signalled = signal_after == 0;
  while (reader->Read(&msg)) {
    if (msg.has_started()) serving = msg.started().decode_worker();
    if (msg.has_finished()) run.finished = msg.finished();
    if (!msg.has_chunk() || msg.chunk().token_ids_size() == 0) continue;
    const absl::Time now = absl::Now();
    if (signalled && last != absl::InfinitePast()) {
      run.gaps_ms.push_back(absl::ToDoubleMilliseconds(now - last));
    }
    last = now;
    run.ids.insert(run.ids.end(), msg.chunk().token_ids().begin(), msg.chunk().token_ids().end());
    if (!signalled && static_cast<int>(run.ids.size()) >= signal_after) {
      for (const ClusterProcess& p : cluster.processes()) {
        if (absl::StrCat("127.0.0.1:", p.port) == serving) cluster.Signal(p.name, SIGTERM);
      }
      std::fprintf(stderr, "SIGTERM to the worker at %s after %zu tokens\n", serving.c_str(),
                   run.ids.size());
      signalled = true;
    }
  }
  run.status = reader->Finish();
  return run;
}

absl::StatusOr<std::unique_ptr<LocalCluster>> StartCluster(bool migrate, int context) {
  LocalClusterOptions o;
  o.bin_dir = absl::GetFlag(FLAGS_bin_dir);
  o.model = absl::GetFlag(FLAGS_model);
  o.log_dir = absl::StrCat(absl::GetFlag(FLAGS_log_dir), "/", migrate ? "migrate" : "recompute",
                           "-", context);
  o.colocated = true;
  o.prefill = 0;
  o.decode = 2;
  o.threads_per_worker = absl::GetFlag(FLAGS_threads);
  o.router_http_listen = "none";
  // No prefix cache: the undisturbed run leaves the prompt cached on one of
  // the two workers, which would shrink a push or a recompute onto it.
  o.extra_decode_flags = {absl::StrCat("--drain_timeout_ms=", absl::GetFlag(FLAGS_drain_ms)),
                          absl::StrCat("--drain_migration=", migrate ? "all" : "off"),
                          "--prefix_cache=false"};
  o.extra_router_flags = {absl::StrCat("--decode_migration=", migrate ? "true" : "false")};
  absl::StatusOr<std::unique_ptr<LocalCluster>> c = LocalCluster::Start(o);
  if (!c.ok()) return c.status();
  // Ready once a probe is served.
  v1::GenerateRequest probe;
  probe.set_text("Hi");
  probe.set_max_tokens(1);
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (!Stream(**c, probe, 0).status.ok()) {
    if (absl::Now() > deadline) return absl::DeadlineExceededError("cluster not ready");
    absl::SleepFor(absl::Milliseconds(200));
  }
  return c;
}

int Main() {
  std::vector<int> contexts;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_contexts), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < 1) {
      std::fprintf(stderr, "bad --contexts entry '%s'\n", std::string(s).c_str());
      return 2;
    }
    contexts.push_back(n);
  }
  std::printf(
      "| context | mode | longest gap after the SIGTERM (ms) | undisturbed: mean / longest gap "
      "(ms) | KV moved (MiB) | migrations | failovers | tokens equal |\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (int context : contexts) {
    for (bool migrate : {true, false}) {
      absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = StartCluster(migrate, context);
      if (!cluster.ok()) {
        std::fprintf(stderr, "cluster: %s\n", cluster.status().ToString().c_str());
        return 1;
      }
      const v1::GenerateRequest req = Request(context);
      const Run base = Stream(**cluster, req, 0);
      const Run moved = Stream(**cluster, req, absl::GetFlag(FLAGS_tokens_before));
      if (!base.status.ok() || !moved.status.ok()) {
        std::fprintf(stderr, "request failed: %s / %s\n", base.status.error_message().c_str(),
                     moved.status.error_message().c_str());
        return 1;
      }
      const v1::Placement& p = moved.finished.placement();
      std::printf("| %d | %s | %.0f | %.0f / %.0f | %.1f | %u | %u | %s |\n", context,
                  migrate ? "migration" : "recompute", moved.max_gap(), base.mean_gap(),
                  base.max_gap(),
                  p.decode_migrations() > 0 ? moved.finished.timings().kv_transfer_bytes() / 1048576.0
                                            : 0.0,
                  p.decode_migrations(), p.decode_failovers(), moved.ids == base.ids ? "yes" : "NO");
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace pdserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return pdserve::Main();
}
