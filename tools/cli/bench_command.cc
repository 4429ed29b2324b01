#include "tools/cli/bench_command.h"

#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"
#include "common/request/sampling_proto.h"
#include "common/rpc/grpc_status.h"
#include "tools/bench/bench_calibrate.h"
#include "tools/bench/bench_client.h"
#include "tools/bench/bench_connection.h"
#include "tools/bench/bench_report.h"
#include "tools/cli/cli_flags.h"

ABSL_FLAG(double, request_rate, 0,
          "bench: mean arrival rate in requests/s (open loop); 0 = unpaced, needs "
          "--max_concurrency");
ABSL_FLAG(double, burstiness, 1.0,
          "bench: Gamma shape of the gaps between arrivals; 1 = Poisson, < 1 burstier");
ABSL_FLAG(int32_t, max_concurrency, 0,
          "bench: cap on requests in flight; alone it makes a closed loop; 0 = no cap");
ABSL_FLAG(int64_t, num_requests, 0, "bench: requests to send (0 = until --duration_s)");
ABSL_FLAG(double, duration_s, 0, "bench: stop sending after this long (0 = --num_requests)");
ABSL_FLAG(int32_t, warmup_requests, 1, "bench: requests sent one by one first, not measured");
ABSL_FLAG(std::string, input_len, "128", "bench: prompt tokens, N or MIN:MAX (uniform)");
ABSL_FLAG(std::string, output_len, "128",
          "bench: max_tokens, N or MIN:MAX; with --ignore_eos the exact output length");
ABSL_FLAG(std::string, length_file, "",
          "bench: lines \"input_len output_len\", used in turn (instead of --input_len and "
          "--output_len)");
ABSL_FLAG(double, long_fraction, 0, "bench: share of requests with a long prompt (mixed load)");
ABSL_FLAG(std::string, long_input_len, "512",
          "bench: prompt tokens of long requests, N or MIN:MAX");
ABSL_FLAG(int32_t, shared_prefixes, 0,
          "bench: requests share this many prefixes (request i takes prefix i mod N); 0 = none");
ABSL_FLAG(int32_t, shared_prefix_len, 256, "bench: tokens of each shared prefix");
ABSL_FLAG(double, slo_ttft_ms, 0, "bench: TTFT SLO for goodput; 0 = none");
ABSL_FLAG(double, slo_tpot_ms, 0, "bench: TPOT SLO for goodput; 0 = none");
ABSL_FLAG(double, request_timeout_s, 300, "bench: deadline of each request");
ABSL_FLAG(std::string, json_out, "", "bench: also write the results as JSON to this file");
ABSL_FLAG(std::string, target, "router",
          "bench: what to load — router (pdserve's Generate), decode (a decode worker's Decode "
          "with local prefill, no router) or openai (an OpenAI-compatible /v1/completions "
          "server streaming SSE: pdserve's own HTTP API, llama-server, vLLM)");
ABSL_FLAG(std::string, address, "", "bench: the target's host:port (default: --router)");
ABSL_FLAG(bool, openai_ban_eos, false,
          "bench --target=openai: also ban the end-of-generation tokens with logit_bias when "
          "ignoring EOS, for servers without ignore_eos (llama-cpp-python's)");
ABSL_FLAG(bool, text_prompts, false,
          "bench: send prompts as text (the decoded synthetic ids; tokenizer from --model) "
          "instead of token ids; implied by --target=openai");
ABSL_FLAG(std::string, workload, "synthetic",
          "bench: synthetic (token-id prompts of --input_len), or a chat workload: code-edit, "
          "summary, chat (multi-turn) or no-copy (tools/bench/bench_conversation.h); targets router "
          "and openai");
ABSL_FLAG(bool, calibrate, false,
          "bench: measure the client's own overhead against an in-process echo server");

namespace pdserve {
namespace {

// Warmup requests take their prompts from far away in the workload's index
// space, so they cannot warm a prefix cache for the measured ones.
constexpr int64_t kWarmupIndexBase = int64_t{1} << 40;

absl::Status Bad(absl::string_view flag, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", why));
}

bool Finite(double v) { return std::isfinite(v); }

absl::StatusOr<LoadOptions> LoadOptionsFromFlags() {
  LoadOptions o;
  o.request_rate = absl::GetFlag(FLAGS_request_rate);
  o.burstiness = absl::GetFlag(FLAGS_burstiness);
  o.max_concurrency = absl::GetFlag(FLAGS_max_concurrency);
  o.num_requests = absl::GetFlag(FLAGS_num_requests);
  const double duration = absl::GetFlag(FLAGS_duration_s);
  const double timeout = absl::GetFlag(FLAGS_request_timeout_s);
  if (!Finite(o.request_rate) || o.request_rate < 0) return Bad("request_rate", "want >= 0");
  if (!Finite(o.burstiness) || o.burstiness <= 0) return Bad("burstiness", "want > 0");
  if (o.max_concurrency < 0) return Bad("max_concurrency", "want >= 0");
  if (o.request_rate == 0 && o.max_concurrency == 0) {
    return Bad("request_rate", "set a rate (open loop), --max_concurrency (closed loop), or both");
  }
  if (o.num_requests < 0) return Bad("num_requests", "want >= 0");
  if (!Finite(duration) || duration < 0) return Bad("duration_s", "want >= 0");
  if (o.num_requests == 0 && duration == 0) {
    return Bad("num_requests", "set --num_requests, --duration_s, or both");
  }
  if (!Finite(timeout) || timeout <= 0) return Bad("request_timeout_s", "want > 0");
  o.duration = absl::Seconds(duration);
  o.request_timeout = absl::Seconds(timeout);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  o.sampling = ToProto(SamplingParamsFromFlags());
  return o;
}

absl::StatusOr<LengthRange> LengthFlag(absl::string_view flag, const std::string& value) {
  absl::StatusOr<LengthRange> r = ParseLengthRange(value);
  if (!r.ok()) return Bad(flag, r.status().message());
  return r;
}

absl::StatusOr<std::vector<LengthPair>> ReadLengthFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Bad("length_file", absl::StrCat("cannot read ", path));
  std::stringstream contents;
  contents << f.rdbuf();
  absl::StatusOr<std::vector<LengthPair>> pairs = ParseLengthFile(contents.str());
  if (!pairs.ok()) return Bad("length_file", absl::StrCat(path, ": ", pairs.status().message()));
  return pairs;
}

// This abseil keeps IsSpecifiedOnCommandLine() private; a changed value is
// what matters for catching a conflicting flag.
bool Changed(absl::string_view flag) {
  const absl::CommandLineFlag* f = absl::FindCommandLineFlag(flag);
  return f != nullptr && f->CurrentValue() != f->DefaultValue();
}

// A chat workload's prompts are its own: flags that shape synthetic
// prompts would be silently ignored, so they are refused.
absl::Status CheckConversationFlags() {
  for (absl::string_view flag : {"input_len", "length_file", "long_fraction", "shared_prefixes",
                                 "text_prompts"}) {
    if (Changed(flag)) {
      return Bad(flag, absl::StrCat("does not apply to --workload=",
                                    absl::GetFlag(FLAGS_workload)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkloadOptions> WorkloadOptionsFromFlags() {
  WorkloadOptions w;
  w.seed = absl::GetFlag(FLAGS_seed);
  const std::string workload = absl::GetFlag(FLAGS_workload);
  if (workload != "synthetic") {
    absl::StatusOr<ConversationKind> kind = ParseConversationKind(workload);
    if (!kind.ok()) return Bad("workload", kind.status().message());
    RETURN_IF_ERROR(CheckConversationFlags());
    w.conversation = *kind;
    ASSIGN_OR_RETURN(w.output, LengthFlag("output_len", absl::GetFlag(FLAGS_output_len)));
    return w;
  }
  const std::string file = absl::GetFlag(FLAGS_length_file);
  if (!file.empty()) {
    if (Changed("input_len") || Changed("output_len")) {
      return Bad("length_file", "replaces --input_len and --output_len; give one or the other");
    }
    ASSIGN_OR_RETURN(w.length_table, ReadLengthFile(file));
  } else {
    ASSIGN_OR_RETURN(w.input, LengthFlag("input_len", absl::GetFlag(FLAGS_input_len)));
    ASSIGN_OR_RETURN(w.output, LengthFlag("output_len", absl::GetFlag(FLAGS_output_len)));
  }
  w.shared_prefixes = absl::GetFlag(FLAGS_shared_prefixes);
  w.shared_prefix_len = absl::GetFlag(FLAGS_shared_prefix_len);
  if (w.shared_prefixes < 0) return Bad("shared_prefixes", "want >= 0");
  if (w.shared_prefixes > 0 && w.shared_prefix_len < 1) return Bad("shared_prefix_len", "want >= 1");
  w.long_fraction = absl::GetFlag(FLAGS_long_fraction);
  if (!(w.long_fraction >= 0 && w.long_fraction <= 1)) return Bad("long_fraction", "want 0..1");
  if (w.long_fraction > 0) {
    ASSIGN_OR_RETURN(w.long_input,
                     LengthFlag("long_input_len", absl::GetFlag(FLAGS_long_input_len)));
  }
  return w;
}

absl::StatusOr<Slo> SloFromFlags() {
  Slo slo;
  const double ttft = absl::GetFlag(FLAGS_slo_ttft_ms), tpot = absl::GetFlag(FLAGS_slo_tpot_ms);
  if (!Finite(ttft) || ttft < 0) return Bad("slo_ttft_ms", "want >= 0 (0 = none)");
  if (!Finite(tpot) || tpot < 0) return Bad("slo_tpot_ms", "want >= 0 (0 = none)");
  if (ttft > 0) slo.ttft_ms = ttft;
  if (tpot > 0) slo.tpot_ms = tpot;
  return slo;
}

// Fails before a long run rather than after it.
absl::Status CheckJsonOut() {
  const std::string path = absl::GetFlag(FLAGS_json_out);
  if (path.empty()) return absl::OkStatus();
  std::ofstream f(path, std::ios::app);
  if (!f) return Bad("json_out", absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// Warms connections, caches and allocators; any failure here means the run
// would measure errors, so it stops the benchmark.
absl::Status Warmup(BenchTarget* target, const Workload& workload, LoadOptions load) {
  load.request_rate = 0;
  load.max_concurrency = 1;
  load.num_requests = absl::GetFlag(FLAGS_warmup_requests);
  load.duration = absl::ZeroDuration();
  load.first_index = kWarmupIndexBase;
  if (load.num_requests == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(LoadResult warm, RunLoad(target, workload, load));
  for (const RequestRecord& r : warm.records) {
    if (r.code != absl::StatusCode::kOk) {
      return absl::Status(r.code, absl::StrCat("warmup request failed: ", r.error));
    }
  }
  return absl::OkStatus();
}

std::string Arrivals(const LoadOptions& o) {
  std::string out = o.request_rate <= 0 ? "closed loop"
                    : o.burstiness == 1 ? absl::StrFormat("Poisson, %g req/s", o.request_rate)
                                        : absl::StrFormat("Gamma (shape %g), %g req/s",
                                                          o.burstiness, o.request_rate);
  if (o.max_concurrency > 0) absl::StrAppend(&out, ", max ", o.max_concurrency, " in flight");
  return out;
}

// `chat`: a conversation workload (its prompts are the server's renderings).
BenchSettings Settings(const std::string& address, const std::string& model,
                       const LoadOptions& o, bool chat) {
  const std::string file = absl::GetFlag(FLAGS_length_file);
  BenchSettings s = {
      {"target", absl::StrCat(absl::GetFlag(FLAGS_target), " at ", address)},
      {"model", model},
      {"prompts", chat                       ? absl::StrCat("chat: ", absl::GetFlag(FLAGS_workload))
                  : o.prompt_text != nullptr ? "text"
                                             : "token ids"},
      {"arrivals", Arrivals(o)},
      {"requests", o.num_requests > 0 ? absl::StrCat(o.num_requests) : "unbounded"},
      {"duration limit (s)", o.duration > absl::ZeroDuration()
                                 ? absl::StrCat(absl::ToDoubleSeconds(o.duration))
                                 : "none"},
      {"input tokens", chat           ? "as the server renders the chat"
                       : file.empty() ? absl::GetFlag(FLAGS_input_len)
                                      : "from " + file},
      {"output tokens", file.empty() ? absl::GetFlag(FLAGS_output_len) : "from " + file},
      {"ignore_eos", o.ignore_eos ? "true" : "false"},
      {"temperature", absl::StrCat(o.sampling.temperature())},
      {"seed", absl::StrCat(o.seed)},
  };
  if (absl::GetFlag(FLAGS_long_fraction) > 0) {
    s.push_back({"long prompts", absl::StrCat(absl::GetFlag(FLAGS_long_fraction) * 100, "% of ",
                                              absl::GetFlag(FLAGS_long_input_len), " tokens")});
  }
  return s;
}

absl::Status Report(const BenchSettings& settings, const LoadResult& result, const Slo& slo) {
  const BenchSummary summary = SummarizeRun(result.records, result.duration_s, slo);
  std::fputs(FormatReport(settings, summary, slo).c_str(), stdout);
  std::fflush(stdout);
  const std::string path = absl::GetFlag(FLAGS_json_out);
  if (!path.empty()) {
    RETURN_IF_ERROR(WriteJsonFile(path, {{"settings", SettingsJson(settings)},
                                         {"summary", SummaryJson(summary, slo)},
                                         {"requests", RecordsJson(result.records)}}));
  }
  if (summary.completed == 0) return absl::UnavailableError("no request succeeded");
  return absl::OkStatus();
}

absl::Status CalibrateCommand() {
  RETURN_IF_ERROR(CheckJsonOut());
  CalibrationOptions o;
  const int64_t requests = absl::GetFlag(FLAGS_num_requests);
  const int concurrency = absl::GetFlag(FLAGS_max_concurrency);
  if (requests > 0) o.requests = requests;
  if (concurrency > 0) o.concurrency = concurrency;
  ASSIGN_OR_RETURN(LengthRange out, LengthFlag("output_len", absl::GetFlag(FLAGS_output_len)));
  o.tokens_per_request = out.max;
  ASSIGN_OR_RETURN(CalibrationResult r, Calibrate(o));
  std::fputs(FormatReport(r.settings, r.summary, Slo{}).c_str(), stdout);
  const std::string path = absl::GetFlag(FLAGS_json_out);
  if (path.empty()) return absl::OkStatus();
  return WriteJsonFile(path, {{"settings", SettingsJson(r.settings)},
                              {"clock_read_ns", r.clock_read_ns},
                              {"summary", SummaryJson(r.summary, Slo{})}});
}

}  // namespace

absl::Status BenchCommand() {
  // main() blocks SIGINT/SIGTERM for the servers' drain; a benchmark has
  // nothing to drain, so Ctrl-C should simply end it. Done before gRPC
  // starts its threads, which inherit this mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
  if (absl::GetFlag(FLAGS_calibrate)) return CalibrateCommand();
  ASSIGN_OR_RETURN(LoadOptions load, LoadOptionsFromFlags());
  ASSIGN_OR_RETURN(WorkloadOptions wopts, WorkloadOptionsFromFlags());
  ASSIGN_OR_RETURN(Slo slo, SloFromFlags());
  if (absl::GetFlag(FLAGS_warmup_requests) < 0) return Bad("warmup_requests", "want >= 0");
  RETURN_IF_ERROR(CheckJsonOut());
  ASSIGN_OR_RETURN(const BenchTargetKind kind, ParseBenchTargetKind(absl::GetFlag(FLAGS_target)));
  const bool chat = wopts.conversation.has_value();
  if (chat && kind == BenchTargetKind::kDecode) {
    return Bad("workload", "the decode target takes token ids; use --target=router or openai");
  }
  const bool text = !chat && (absl::GetFlag(FLAGS_text_prompts) || kind == BenchTargetKind::kOpenAi);
  std::optional<PromptText> tokenizer;
  if (text || kind != BenchTargetKind::kRouter) {
    ASSIGN_OR_RETURN(tokenizer, PromptText::FromModel(absl::GetFlag(FLAGS_model)));
  }
  if (text) load.prompt_text = &*tokenizer;
  std::string address = absl::GetFlag(FLAGS_address);
  if (address.empty()) address = absl::GetFlag(FLAGS_router);
  ASSIGN_OR_RETURN(const ClientSecurity security, ClientSecurityFromFlags());
  ASSIGN_OR_RETURN(BenchConnection server,
                   ConnectBench(kind, address, tokenizer ? &*tokenizer : nullptr, security,
                                absl::GetFlag(FLAGS_openai_ban_eos)));
  wopts.vocab_size = server.vocab_size;
  ASSIGN_OR_RETURN(Workload workload, Workload::Create(std::move(wopts)));
  if (server.context_length > 0 && workload.MaxRequestTokens() > server.context_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("the longest request needs ", workload.MaxRequestTokens(),
                     " tokens (prompt + output); the model's context is ", server.context_length));
  }
  std::fprintf(stderr, "pdserve bench: %s, %d warmup request(s)\n", server.model_name.c_str(),
               absl::GetFlag(FLAGS_warmup_requests));
  RETURN_IF_ERROR(Warmup(server.target.get(), workload, load));
  std::fprintf(stderr, "pdserve bench: measuring (%s)\n", Arrivals(load).c_str());
  ASSIGN_OR_RETURN(LoadResult result, RunLoad(server.target.get(), workload, load));
  return Report(Settings(address, server.model_name, load, chat), result, slo);
}

}  // namespace pdserve
