#include "tools/cli/bench_engine.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/base/status_macros.h"
#include "common/engine/engine.h"
#include "common/model/model.h"
#include "common/quant/kernels.h"
#include "common/quant/packed_gemm.h"
#include "common/runtime/runtime_factory.h"
#include "tools/bench/kernel_bench.h"
#include "tools/bench/peak_probe.h"
#include "tools/cli/cli_flags.h"

ABSL_FLAG(std::string, bench_threads, "1,2", "Thread counts to measure");
ABSL_FLAG(int32_t, bench_pp, 512, "Prompt length for the prompt-processing test");
ABSL_FLAG(int32_t, bench_tg, 128, "Tokens for the single-stream decode test");
ABSL_FLAG(std::string, bench_batches, "1,4,8,16", "Batch sizes for batched decode");
ABSL_FLAG(int32_t, bench_batch_tokens, 64, "Decode steps per batched-decode test");
ABSL_FLAG(int32_t, bench_context, 16,
          "Prompt length of the decode tests: the context decode starts from");
ABSL_FLAG(int32_t, bench_repeats, 3, "Repetitions; the best run is reported");
ABSL_FLAG(std::string, bench_kernels, "auto",
          "CPU kernels to measure: auto (the best this CPU runs), avx512, avx2 or scalar");
ABSL_FLAG(std::string, bench_json, "", "Also write results as JSON to this file");
ABSL_FLAG(bool, bench_peak, false,
          "Instead of a model: measure this CPU's int8 dot-product and f32 FMA peaks (and, "
          "for each kernel variant, the llama-order bound of its exact arithmetic), and each "
          "weight type's matmul on model-shaped matrices as a share of them, on the largest "
          "--bench_threads count");
ABSL_FLAG(double, bench_peak_gbps, 4800,
          "Device memory bandwidth for the model-bandwidth utilisation column (GPU runs; "
          "H200: 4800 GB/s)");

namespace pdserve {
namespace {

using Clock = std::chrono::steady_clock;

struct Result {
  std::string test;
  int threads;
  double tokens_per_s;
  double mbu = 0;  // decode on a device: bytes a step must read / time / peak bandwidth
};

// Bytes one decode step must read with f16 weights (what the CUDA runner
// keeps): every matrix once, plus each sequence's K/V over its context.
double DecodeStepBytes(const ModelConfig& c, int batch, int context) {
  const double per_layer = static_cast<double>(c.n_embd) * (c.q_dim() + 2 * c.kv_dim()) +
                           static_cast<double>(c.q_dim()) * c.n_embd + 3.0 * c.n_embd * c.n_ff;
  const double weights = 2.0 * (per_layer * c.n_layers + static_cast<double>(c.n_vocab) * c.n_embd);
  const double kv = 2.0 * 2.0 * c.n_layers * c.kv_dim() * static_cast<double>(context) * batch;
  return weights + kv;
}

// Deterministic pseudo-random prompt: ids from the ordinary-token range.
std::vector<int32_t> SyntheticPrompt(int n, int vocab, uint32_t salt) {
  std::vector<int32_t> p(n);
  uint32_t x = 2463534242u ^ salt;
  for (int i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = 100 + static_cast<int32_t>(x % static_cast<uint32_t>(vocab - 200));
  }
  return p;
}

// Runs `batch` sequences of `prompt_len` tokens generating `gen` tokens each
// and returns (prefill seconds, decode seconds): prefill ends when every
// sequence has its first token.
absl::StatusOr<std::pair<double, double>> TimeRun(const Model& model, ModelRunner& runner,
                                                  KvCache& cache, int batch, int prompt_len,
                                                  int gen) {
  // No prefix cache: every repeat must compute its prompt, not find it cached.
  Engine engine(
      &model.tokenizer(), &runner, &cache,
      {.max_batch_tokens = std::max(512, prompt_len), .max_running = batch, .prefix_cache = false});
  int first_tokens = 0;
  Clock::time_point start = Clock::now(), prefilled;
  for (int b = 0; b < batch; ++b) {
    SequenceOptions o;
    o.prompt = SyntheticPrompt(prompt_len, model.config().n_vocab, b);
    o.max_tokens = gen;
    o.ignore_eos = true;
    RETURN_IF_ERROR(engine
                        .Add(std::move(o),
                             [&](const TokenEvent& e) {
                               if (e.index == 0 && e.token >= 0 && ++first_tokens == batch) {
                                 prefilled = Clock::now();
                               }
                             })
                        .status());
  }
  while (engine.HasWork()) RETURN_IF_ERROR(engine.Step());
  const Clock::time_point end = Clock::now();
  return std::make_pair(std::chrono::duration<double>(prefilled - start).count(),
                        std::chrono::duration<double>(end - prefilled).count());
}

absl::StatusOr<std::vector<Result>> BenchThreads(const Model& model, KvCache& cache,
                                                 const DeviceSpec& device, int threads) {
  ASSIGN_OR_RETURN(
      std::unique_ptr<ModelRunner> runner_ptr,
      CreateModelRunner(
          model.config(), &model.weights(),
          {.device = device, .threads = threads, .cuda_graphs = absl::GetFlag(FLAGS_cuda_graphs)}));
  ModelRunner& runner = *runner_ptr;
  std::vector<Result> out;
  const int reps = absl::GetFlag(FLAGS_bench_repeats);
  const int pp = absl::GetFlag(FLAGS_bench_pp), tg = absl::GetFlag(FLAGS_bench_tg);
  const int ctx = absl::GetFlag(FLAGS_bench_context);
  if (pp < 1 || tg < 1 || ctx < 1) {
    return absl::InvalidArgumentError("--bench_pp, --bench_tg and --bench_context must be >= 1");
  }
  double best_pp = 0, best_tg = 0;
  for (int r = 0; r < reps; ++r) {
    ASSIGN_OR_RETURN(auto t_pp, TimeRun(model, runner, cache, 1, pp, 1));
    best_pp = std::max(best_pp, pp / t_pp.first);
    ASSIGN_OR_RETURN(auto t_tg, TimeRun(model, runner, cache, 1, ctx, tg + 1));
    best_tg = std::max(best_tg, tg / t_tg.second);
  }
  out.push_back({absl::StrCat("pp", pp), threads, best_pp});
  out.push_back({absl::StrCat("tg", tg), threads, best_tg});
  const int steps = absl::GetFlag(FLAGS_bench_batch_tokens);
  for (absl::string_view b : absl::StrSplit(absl::GetFlag(FLAGS_bench_batches), ',')) {
    int batch = 0;
    if (!absl::SimpleAtoi(b, &batch) || batch < 1) {
      return absl::InvalidArgumentError("bad --bench_batches entry");
    }
    double best = 0;
    for (int r = 0; r < reps; ++r) {
      ASSIGN_OR_RETURN(auto t, TimeRun(model, runner, cache, batch, ctx, steps + 1));
      best = std::max(best, batch * steps / t.second);
    }
    Result r{absl::StrCat("decode_b", batch), threads, best};
    if (device.is_cuda()) {
      // Mean context over the run: the prompt plus half the steps.
      const double step_bytes = DecodeStepBytes(model.config(), batch, ctx + steps / 2);
      r.mbu = step_bytes * (best / batch) / (absl::GetFlag(FLAGS_bench_peak_gbps) * 1e9);
    }
    out.push_back(r);
  }
  return out;
}

void Report(const std::vector<Result>& results, long peak_rss_kb) {
  std::printf("%-14s %8s %12s %8s\n", "test", "threads", "tokens/s", "MBU");
  for (const Result& r : results) {
    std::printf("%-14s %8d %12.1f %8s\n", r.test.c_str(), r.threads, r.tokens_per_s,
                r.mbu > 0 ? absl::StrFormat("%.1f%%", 100 * r.mbu).c_str() : "-");
  }
  std::printf("peak RSS: %.1f MiB\n", peak_rss_kb / 1024.0);
  const std::string path = absl::GetFlag(FLAGS_bench_json);
  if (path.empty()) return;
  std::ofstream f(path);
  f << "{\"peak_rss_kb\": " << peak_rss_kb << ", \"results\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    f << (i ? ", " : "") << "{\"test\": \"" << results[i].test
      << "\", \"threads\": " << results[i].threads
      << ", \"tokens_per_s\": " << results[i].tokens_per_s << ", \"mbu\": " << results[i].mbu
      << "}";
  }
  f << "]}\n";
}

// --bench_kernels: runs the kernels of a lesser ISA on a CPU that has a
// better one, so one machine can measure what others would run.
absl::Status SelectKernels() {
  const std::string want = absl::GetFlag(FLAGS_bench_kernels);
  if (want == "auto") return absl::OkStatus();
  for (KernelIsa isa : {KernelIsa::kAvx512Vnni, KernelIsa::kAvx2, KernelIsa::kScalar}) {
    if (want != KernelIsaName(isa)) continue;
    ForceKernelIsaForTesting(isa);
    if (ActiveKernelIsa() != isa) {
      return absl::FailedPreconditionError(
          absl::StrCat("this CPU cannot run the --bench_kernels=", want, " kernels"));
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError("--bench_kernels must be auto, avx512, avx2 or scalar");
}

// --bench_peak: the peaks, then every matmul at a prompt's, a decode step's
// and a speculative step's row count, as a share of the best int8 peak and
// of the llama-order bound of the active kernels' per-slice arithmetic
// (not for Q4_K, whose order sums 32 products before its first float
// operation).
void BenchPeak(int threads) {
  ThreadPool pool(threads);
  const std::vector<Peak> peaks = MeasurePeaks(&pool);
  absl::PrintF("%-40s %14s %14s\n", "peak", "1 thread G/s", absl::StrCat(threads, " threads G/s"));
  double int8_peak = 0;
  double order_bound = 0;
  const std::optional<PackedVariant> active = PackedVariantOf(ActiveKernelIsa());
  for (const Peak& p : peaks) {
    absl::PrintF("%-40s %14.1f %14.1f\n", p.what, p.per_s_1thread / 1e9, p.per_s_all / 1e9);
    if (p.order_of.has_value()) {
      if (p.order_of == active) order_bound = p.per_s_all;
    } else if (p.int8) {
      int8_peak = std::max(int8_peak, p.per_s_all);
    }
  }
  absl::PrintF("\n%-44s %7s %12s %9s %9s   (%s kernels, %d threads)\n", "matmul", "tokens",
               "G MAC/s", "of peak", "of order", KernelIsaName(ActiveKernelIsa()), threads);
  for (const KernelRate& k : MeasureKernels(&pool, {512, 8, 1})) {
    absl::PrintF("%-44s %7d %12.1f %8.1f%% %s\n", k.matrix, k.tokens, k.macs_per_s / 1e9,
                 100.0 * k.macs_per_s / int8_peak,
                 order_bound > 0 && k.slice_order
                     ? absl::StrFormat("%8.1f%%", 100.0 * k.macs_per_s / order_bound)
                     : std::string(9, '-'));
  }
}

int MaxThreads() {
  int most = 1;
  for (absl::string_view t : absl::StrSplit(absl::GetFlag(FLAGS_bench_threads), ',')) {
    int n = 0;
    if (absl::SimpleAtoi(t, &n)) most = std::max(most, n);
  }
  return most;
}

}  // namespace

absl::Status BenchEngineCommand() {
  RETURN_IF_ERROR(SelectKernels());
  if (absl::GetFlag(FLAGS_bench_peak)) {
    BenchPeak(MaxThreads());
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(absl::GetFlag(FLAGS_model)));
  ASSIGN_OR_RETURN(const DeviceSpec device, DeviceSpec::Parse(absl::GetFlag(FLAGS_device)));
  ASSIGN_OR_RETURN(
      std::unique_ptr<KvCache> cache,
      CreateKvCache(device,
                    KvLayout::ForModel(model->config(), absl::GetFlag(FLAGS_block_size),
                                       absl::GetFlag(FLAGS_kv_dtype)),
                    absl::GetFlag(FLAGS_kv_blocks)));
  std::vector<Result> all;
  for (absl::string_view t : absl::StrSplit(absl::GetFlag(FLAGS_bench_threads), ',')) {
    int threads = 0;
    if (!absl::SimpleAtoi(t, &threads) || threads < 1) {
      return absl::InvalidArgumentError("bad --bench_threads entry");
    }
    ASSIGN_OR_RETURN(std::vector<Result> r, BenchThreads(*model, *cache, device, threads));
    all.insert(all.end(), r.begin(), r.end());
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  Report(all, ru.ru_maxrss);
  return absl::OkStatus();
}

}  // namespace pdserve
