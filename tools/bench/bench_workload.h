// The synthetic workload of `pdserve bench`: request lengths, prompt token
// ids and arrival times, all deterministic in the seed so that two runs (or
// two servers) see exactly the same requests.
//
// Prompts are token ids, not text, so input lengths are exact (text would
// be re-tokenized by the router) — unless a named conversation workload
// (bench_conversation.h) is chosen: then each request is chat messages and
// only its output length comes from here. Ids are drawn from the ordinary range
// [100, vocab - 100) — away from the special tokens that sit at either end
// of a vocabulary — and differ per request, so no prompt shares a cached
// prefix with another unless shared prefixes are asked for.
//
// Thread-safety: Workload is immutable after Create(); ArrivalProcess is not
// thread-safe.
#ifndef PDSERVE_TOOLS_BENCH_BENCH_WORKLOAD_H_
#define PDSERVE_TOOLS_BENCH_BENCH_WORKLOAD_H_

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/text/chat_template.h"
#include "tools/bench/bench_conversation.h"

namespace pdserve {

// Inclusive; min == max is a fixed length.
struct LengthRange {
  int min = 0;
  int max = 0;
};
// "128" (fixed) or "64:512" (uniform); lengths are at least 1.
absl::StatusOr<LengthRange> ParseLengthRange(absl::string_view text);

struct LengthPair {
  int input = 0;
  int output = 0;
};
// One "input_len output_len" pair per line; blank lines and lines starting
// with '#' are skipped.
absl::StatusOr<std::vector<LengthPair>> ParseLengthFile(absl::string_view contents);

struct WorkloadOptions {
  LengthRange input{128, 128};
  LengthRange output{128, 128};
  // When set, request i takes pair i mod size and `input`/`output` are unused.
  std::vector<LengthPair> length_table;
  // Mixed workload: this share of requests takes its input length from
  // `long_input` instead.
  double long_fraction = 0;
  LengthRange long_input{512, 512};
  // Shared prefixes (multi-tenant system prompts): request i starts with
  // prefix (i mod shared_prefixes), shared_prefix_len tokens drawn from the
  // seed alone, then its own prompt. 0 = every prompt unique.
  int shared_prefixes = 0;
  int shared_prefix_len = 0;
  int vocab_size = 0;
  uint64_t seed = 0;
  // When set, every request is this workload's chat (input lengths,
  // shared prefixes and long prompts do not apply).
  std::optional<ConversationKind> conversation;
};

struct RequestShape {
  int64_t index = 0;
  std::vector<int32_t> prompt;     // empty for a conversation
  std::vector<ChatMessage> messages;  // a conversation workload's chat
  int max_tokens = 0;
  bool long_prompt = false;
};

class Workload {
 public:
  static absl::StatusOr<Workload> Create(WorkloadOptions options);

  // The same (seed, index) always gives the same request.
  RequestShape Make(int64_t index) const;
  // Prompt plus output tokens of the longest possible request, to check the
  // workload against the model's context before sending anything. Output
  // tokens only for a conversation, whose prompt length the server's
  // template decides.
  int MaxRequestTokens() const;

 private:
  explicit Workload(WorkloadOptions options) : options_(std::move(options)) {}
  int MaxOwnTokens() const;  // without a shared prefix

  WorkloadOptions options_;
};

// Gaps between arrivals: Gamma(shape = burstiness, mean = 1 / rate). Shape 1
// is a Poisson process; below 1 arrivals bunch up, above 1 they even out.
class ArrivalProcess {
 public:
  ArrivalProcess(double rate, double burstiness, uint64_t seed);
  double NextGapS();

 private:
  std::mt19937_64 rng_;
  std::gamma_distribution<double> gap_;
};

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_BENCH_WORKLOAD_H_
