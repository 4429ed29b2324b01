#include "tools/bench/bench_workload.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tools/bench/split_mix64.h"

namespace pdserve {
namespace {

// Ids below and above these margins are left alone: that is where
// vocabularies keep their special and control tokens.
constexpr int kIdMargin = 100;

absl::Status CheckRange(const LengthRange& r, absl::string_view what) {
  if (r.min < 1 || r.max < r.min) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": need 1 <= min <= max, got ", r.min, ":", r.max));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LengthRange> ParseLengthRange(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  LengthRange r;
  bool ok = parts.size() <= 2 && absl::SimpleAtoi(parts[0], &r.min);
  r.max = r.min;
  if (ok && parts.size() == 2) ok = absl::SimpleAtoi(parts[1], &r.max);
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad length '", text, "': want N or MIN:MAX, e.g. 128 or 64:512"));
  }
  if (r.min < 1 || r.max < r.min) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad length '", text, "': need 1 <= MIN <= MAX"));
  }
  return r;
}

absl::StatusOr<std::vector<LengthPair>> ParseLengthFile(absl::string_view contents) {
  std::vector<LengthPair> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t,"), absl::SkipEmpty());
    LengthPair p;
    if (f.size() != 2 || !absl::SimpleAtoi(f[0], &p.input) || !absl::SimpleAtoi(f[1], &p.output) ||
        p.input < 1 || p.output < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("length file line ", line_no,
                       ": want \"input_len output_len\" (both >= 1), got '", line, "'"));
    }
    out.push_back(p);
  }
  if (out.empty()) return absl::InvalidArgumentError("length file has no length pairs");
  return out;
}

absl::StatusOr<Workload> Workload::Create(WorkloadOptions options) {
  if (options.vocab_size < 2 * kIdMargin + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary of ", options.vocab_size, " is too small for synthetic prompts"));
  }
  if (options.long_fraction < 0 || options.long_fraction > 1) {
    return absl::InvalidArgumentError("long_fraction must be in [0, 1]");
  }
  if (options.length_table.empty()) {
    if (absl::Status s = CheckRange(options.input, "input_len"); !s.ok()) return s;
    if (absl::Status s = CheckRange(options.output, "output_len"); !s.ok()) return s;
  }
  if (options.long_fraction > 0) {
    if (absl::Status s = CheckRange(options.long_input, "long_input_len"); !s.ok()) return s;
  }
  return Workload(std::move(options));
}

RequestShape Workload::Make(int64_t index) const {
  // One stream per request, so request i does not depend on how many others
  // were made before it (duration-bound runs make an unknown number).
  SplitMix64 rng(options_.seed * 0x2545f4914f6cdd1dull + static_cast<uint64_t>(index));
  RequestShape r;
  r.index = index;
  int input = 0;
  if (!options_.length_table.empty()) {
    const size_t n = options_.length_table.size();
    const LengthPair& p = options_.length_table[static_cast<size_t>(index) % n];
    input = p.input;
    r.max_tokens = p.output;
  } else {
    input = rng.Between(options_.input.min, options_.input.max);
    r.max_tokens = rng.Between(options_.output.min, options_.output.max);
  }
  if (options_.conversation.has_value()) {
    r.messages = MakeConversation(*options_.conversation, options_.seed, index);
    return r;
  }
  if (options_.long_fraction > 0 && rng.Unit() < options_.long_fraction) {
    input = rng.Between(options_.long_input.min, options_.long_input.max);
    r.long_prompt = true;
  }
  r.prompt.resize(static_cast<size_t>(input));
  for (int32_t& id : r.prompt) id = rng.Between(kIdMargin, options_.vocab_size - kIdMargin - 1);
  if (options_.shared_prefixes > 0) {
    // The prefix's own stream depends on the seed and its group only, so
    // every request of a group (and every server) sees the same tokens.
    const uint64_t group = static_cast<uint64_t>(index) % static_cast<uint64_t>(options_.shared_prefixes);
    SplitMix64 prefix_rng(options_.seed * 0x9e3779b97f4a7c15ull + 0x5eedull * (group + 1));
    std::vector<int32_t> prefix(static_cast<size_t>(options_.shared_prefix_len));
    for (int32_t& id : prefix) id = prefix_rng.Between(kIdMargin, options_.vocab_size - kIdMargin - 1);
    r.prompt.insert(r.prompt.begin(), prefix.begin(), prefix.end());
  }
  return r;
}

int Workload::MaxRequestTokens() const {
  if (options_.conversation.has_value()) return options_.output.max;
  return MaxOwnTokens() + (options_.shared_prefixes > 0 ? options_.shared_prefix_len : 0);
}

int Workload::MaxOwnTokens() const {
  const int long_input = options_.long_fraction > 0 ? options_.long_input.max : 0;
  if (options_.length_table.empty()) {
    return std::max(options_.input.max, long_input) + options_.output.max;
  }
  int m = 0;
  for (const LengthPair& p : options_.length_table) {
    m = std::max(m, std::max(p.input, long_input) + p.output);
  }
  return m;
}

ArrivalProcess::ArrivalProcess(double rate, double burstiness, uint64_t seed)
    : rng_(seed), gap_(burstiness, 1.0 / (rate * burstiness)) {}

double ArrivalProcess::NextGapS() { return gap_(rng_); }

}  // namespace pdserve
