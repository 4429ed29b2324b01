// pdserve_kv_eval: what int8 KV costs in quality and saves in memory, against
// f16 KV, on the real model in one run (docs/PERFORMANCE.md "int8 KV cache").
//
//  1. Greedy agreement: each golden prompt (tests/data/golden_greedy.json)
//     generates --tokens greedy tokens under f16 and under int8 KV; reports
//     the tokens equal before the first divergence and the positions equal
//     overall.
//  2. Perplexity: --text_file is tokenised and cut into windows of --ctx
//     tokens; each window is evaluated from position 0 and every token after
//     its first is scored by the log-probability the model gave it. Reports
//     mean log-likelihood and perplexity per dtype.
//  3. Memory: KV bytes per token and per (layer, block) per dtype, and a
//     decode-speed probe (greedy decode of --decode_tokens after a --ctx
//     token prompt from the text).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/base/status_macros.h"
#include "common/cpu/cpu_model_runner.h"
#include "common/engine/engine.h"
#include "common/model/model.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, model, "models/SmolLM2-135M-Instruct.Q4_1.gguf", "GGUF model path");
ABSL_FLAG(std::string, golden, "tests/data/golden_greedy.json", "golden prompts ('' = skip)");
ABSL_FLAG(std::string, text_file, "tests/data/perplexity_text.txt",
          "text scored for perplexity ('' = skip)");
ABSL_FLAG(int, threads, 2, "engine threads");
ABSL_FLAG(int, tokens, 64, "greedy tokens per golden prompt");
ABSL_FLAG(int, ctx, 1024, "perplexity window (tokens)");
ABSL_FLAG(int, decode_tokens, 128, "greedy tokens of the decode-speed probe (0 = skip)");

namespace pdserve {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kBlockSize = 16;
constexpr const char* kDtypes[] = {kKvDtypeF16, kKvDtypeInt8};

struct Evaluator {
  const Model* model;
  int threads;

  absl::StatusOr<std::unique_ptr<KvCache>> Cache(const std::string& dtype, int64_t tokens) const {
    return KvCache::Create(KvLayout::ForModel(model->config(), kBlockSize, dtype),
                           BlocksForTokens(tokens, kBlockSize) + 1);
  }

  // Greedy tokens after `prompt`; `decode_seconds` gets the time of all
  // steps after the first (the prompt's).
  absl::StatusOr<std::vector<int32_t>> Greedy(const std::string& dtype,
                                              const std::vector<int32_t>& prompt, int n,
                                              double* decode_seconds) const {
    CpuModelRunner runner(model->config(), &model->weights(), threads);
    ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache, Cache(dtype, prompt.size() + n));
    Engine engine(&model->tokenizer(), &runner, cache.get(), {.max_batch_tokens = 4096});
    std::vector<int32_t> out;
    SequenceOptions o;
    o.prompt = prompt;
    o.max_tokens = n;
    o.ignore_eos = true;
    RETURN_IF_ERROR(engine
                        .Add(o,
                             [&](const TokenEvent& e) {
                               if (e.token >= 0) out.push_back(e.token);
                             })
                        .status());
    Clock::time_point first_done;
    bool first = true;
    while (engine.HasWork()) {
      RETURN_IF_ERROR(engine.Step());
      if (first && !out.empty()) {
        first_done = Clock::now();
        first = false;
      }
    }
    if (decode_seconds != nullptr) {
      *decode_seconds = std::chrono::duration<double>(Clock::now() - first_done).count();
    }
    return out;
  }

  // Sum of log p(token[i] | tokens[0..i)) over i in [1, n) of one window.
  // The window goes in as one-token chunks of a single sequence (they share
  // its block table), so one step returns logits for every position.
  absl::StatusOr<double> WindowLogLikelihood(const std::string& dtype,
                                             absl::Span<const int32_t> tokens) const {
    CpuModelRunner runner(model->config(), &model->weights(), threads);
    ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache, Cache(dtype, tokens.size()));
    ASSIGN_OR_RETURN(std::vector<int32_t> blocks,
                     cache->allocator().Allocate(BlocksForTokens(tokens.size(), kBlockSize)));
    const int64_t vocab = model->config().n_vocab;
    constexpr size_t kStep = 128;
    double sum = 0.0;
    std::vector<float> logits;
    for (size_t start = 0; start + 1 < tokens.size(); start += kStep) {
      const size_t end = std::min(tokens.size() - 1, start + kStep);
      ForwardBatch batch;
      for (size_t i = start; i < end; ++i) {
        batch.chunks.push_back(
            {tokens.subspan(i, 1), static_cast<int32_t>(i), blocks, /*want_logits=*/true});
      }
      RETURN_IF_ERROR(runner.Forward(batch, *cache, &logits));
      for (size_t i = start; i < end; ++i) {
        const float* row = &logits[(i - start) * vocab];
        const float mx = *std::max_element(row, row + vocab);
        double z = 0.0;
        for (int64_t v = 0; v < vocab; ++v) z += std::exp(static_cast<double>(row[v] - mx));
        sum += static_cast<double>(row[tokens[i + 1]] - mx) - std::log(z);
      }
    }
    return sum;
  }
};

absl::Status GreedyAgreement(const Evaluator& ev, const std::string& path, int n) {
  std::ifstream f(path);
  if (!f.good()) return absl::NotFoundError("cannot open " + path);
  const nlohmann::json golden = nlohmann::json::parse(f);
  int total_prefix = 0, total_equal = 0, total = 0, identical = 0;
  std::printf("%-28s %12s %12s\n", "case", "prefix", "equal");
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_tokens"].get<std::vector<int32_t>>();
    ASSIGN_OR_RETURN(std::vector<int32_t> a, ev.Greedy(kKvDtypeF16, prompt, n, nullptr));
    ASSIGN_OR_RETURN(std::vector<int32_t> b, ev.Greedy(kKvDtypeInt8, prompt, n, nullptr));
    int prefix = 0;
    while (prefix < n && a[prefix] == b[prefix]) ++prefix;
    int equal = 0;
    for (int i = 0; i < n; ++i) equal += a[i] == b[i];
    std::printf("%-28s %9d/%-2d %9d/%-2d\n", c["name"].get<std::string>().c_str(), prefix, n, equal,
                n);
    total_prefix += prefix;
    total_equal += equal;
    total += n;
    identical += prefix == n;
  }
  std::printf(
      "greedy: %d of %zu cases identical; tokens before first divergence %d/%d (%.1f%%); "
      "positions equal %d/%d (%.1f%%)\n",
      identical, golden["cases"].size(), total_prefix, total, 100.0 * total_prefix / total,
      total_equal, total, 100.0 * total_equal / total);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> TextTokens(const Model& model, const std::string& path) {
  std::ifstream f(path);
  if (!f.good()) return absl::NotFoundError("cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return model.tokenizer().Encode(ss.str(), false);
}

absl::Status Perplexity(const Evaluator& ev, const std::vector<int32_t>& tokens, int ctx) {
  std::printf("perplexity text: %zu tokens, windows of %d\n", tokens.size(), ctx);
  for (const char* dtype : kDtypes) {
    double ll = 0.0;
    int64_t scored = 0;
    for (size_t start = 0; start + 1 < tokens.size(); start += ctx) {
      const size_t len = std::min<size_t>(ctx, tokens.size() - start);
      ASSIGN_OR_RETURN(
          double w, ev.WindowLogLikelihood(dtype, absl::MakeConstSpan(tokens).subspan(start, len)));
      ll += w;
      scored += static_cast<int64_t>(len) - 1;
    }
    std::printf("%-5s: %lld tokens scored, mean log-likelihood %.6f, perplexity %.4f\n", dtype,
                static_cast<long long>(scored), ll / scored, std::exp(-ll / scored));
  }
  return absl::OkStatus();
}

absl::Status DecodeSpeed(const Evaluator& ev, const std::vector<int32_t>& tokens, int ctx, int n) {
  const std::vector<int32_t> prompt(tokens.begin(),
                                    tokens.begin() + std::min<size_t>(ctx, tokens.size()));
  for (const char* dtype : kDtypes) {
    double seconds = 0.0;
    ASSIGN_OR_RETURN(std::vector<int32_t> out, ev.Greedy(dtype, prompt, n, &seconds));
    std::printf("%-5s: decode after a %zu-token prompt: %.1f tokens/s (%d steps)\n", dtype,
                prompt.size(), (n - 1) / seconds, n - 1);
  }
  return absl::OkStatus();
}

absl::Status Run() {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(absl::GetFlag(FLAGS_model)));
  const Evaluator ev{model.get(), absl::GetFlag(FLAGS_threads)};
  for (const char* dtype : kDtypes) {
    const KvLayout l = KvLayout::ForModel(model->config(), kBlockSize, dtype);
    std::printf("%-5s: KV %lld bytes per token, %lld bytes per (layer, block of %d)\n", dtype,
                static_cast<long long>(l.bytes_per_token()),
                static_cast<long long>(l.bytes_per_layer_block()), kBlockSize);
  }
  if (!absl::GetFlag(FLAGS_golden).empty()) {
    RETURN_IF_ERROR(GreedyAgreement(ev, absl::GetFlag(FLAGS_golden), absl::GetFlag(FLAGS_tokens)));
  }
  if (absl::GetFlag(FLAGS_text_file).empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<int32_t> tokens, TextTokens(*model, absl::GetFlag(FLAGS_text_file)));
  RETURN_IF_ERROR(Perplexity(ev, tokens, absl::GetFlag(FLAGS_ctx)));
  if (absl::GetFlag(FLAGS_decode_tokens) > 1) {
    RETURN_IF_ERROR(
        DecodeSpeed(ev, tokens, absl::GetFlag(FLAGS_ctx), absl::GetFlag(FLAGS_decode_tokens)));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace pdserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  const absl::Status st = pdserve::Run();
  if (!st.ok()) {
    std::fprintf(stderr, "pdserve_kv_eval: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  return 0;
}
