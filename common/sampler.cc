#include "common/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "absl/types/span.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// First prefix size tried by top-p; nucleus sets are usually far smaller than
// the vocabulary, so sorting a growing prefix beats sorting everything.
constexpr size_t kTopPFirstPrefix = 64;

// SplitMix64 finalizer (Steele, Lea, Flood 2014): a bijection with full
// avalanche, so neighbouring counters give unrelated outputs.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct Candidate {
  float logit;
  int32_t id;
};

// A strict total order (ties broken by id) so that nth_element, partial_sort
// and sort all leave candidates in one canonical order; the draw walks that
// order, so it must not depend on the algorithm or the standard library.
bool Before(const Candidate& a, const Candidate& b) {
  if (a.logit != b.logit) return a.logit > b.logit;
  return a.id < b.id;
}

struct Scratch {
  std::vector<Candidate> candidates;
  std::vector<float> weights;
  std::vector<int32_t> window;
};

// Per-thread buffers: a 49152-entry vocabulary would otherwise cost two
// large allocations per generated token.
Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

int32_t ArgMax(absl::Span<const float> logits) {
  int32_t best = 0;
  float best_logit = logits[0];
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > best_logit) {
      best_logit = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

// Candidates in id order. NaN would break the strict ordering the sorts rely
// on, so it is treated as "never pick".
void FillCandidates(absl::Span<const float> logits, std::vector<Candidate>& out) {
  out.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    out[i] = Candidate{std::isnan(l) ? kNegInf : l, static_cast<int32_t>(i)};
  }
}

float MaxLogit(const std::vector<Candidate>& c, bool sorted) {
  if (sorted) return c.front().logit;
  float best = kNegInf;
  for (const Candidate& x : c) best = std::max(best, x.logit);
  return best;
}

void TopK(size_t k, std::vector<Candidate>& c) {
  std::nth_element(c.begin(), c.begin() + k, c.end(), Before);
  c.resize(k);
  std::sort(c.begin(), c.end(), Before);
}

// Keeps the smallest most-probable prefix whose probability mass reaches p
// (llama.cpp: cumulative >= p, the crossing token included). Leaves the
// survivors sorted.
void TopP(float p, std::vector<Candidate>& c, bool sorted) {
  const float max_logit = MaxLogit(c, sorted);
  double total = 0.0;
  for (const Candidate& x : c) total += std::exp(x.logit - max_logit);
  const double target = static_cast<double>(p) * total;
  double cumulative = 0.0;
  size_t scanned = 0;
  size_t prefix = sorted ? c.size() : std::min(c.size(), kTopPFirstPrefix);
  while (true) {
    // Growing the prefix keeps the already-scanned part unchanged because
    // Before is a total order.
    if (!sorted) std::partial_sort(c.begin(), c.begin() + prefix, c.end(), Before);
    for (; scanned < prefix; ++scanned) {
      cumulative += std::exp(c[scanned].logit - max_logit);
      if (cumulative >= target) {
        c.resize(scanned + 1);
        return;
      }
    }
    if (prefix == c.size()) return;  // rounding left us short: keep all
    prefix = std::min(c.size(), prefix * 8);
  }
}

// Keeps tokens whose probability is at least p times the best one, i.e.
// logit >= max + ln(p). The filter is stable, so the order stays canonical.
void MinP(float p, std::vector<Candidate>& c, bool sorted) {
  const float min_logit = MaxLogit(c, sorted) + std::log(p);
  c.erase(std::remove_if(c.begin(), c.end(),
                         [min_logit](const Candidate& x) { return x.logit < min_logit; }),
          c.end());
}

// Temperature, softmax and inverse-CDF draw over the survivors in their
// canonical order.
int32_t Draw(const std::vector<Candidate>& c, float temperature, double u,
             std::vector<float>& weights) {
  float max_scaled = kNegInf;
  for (const Candidate& x : c) max_scaled = std::max(max_scaled, x.logit / temperature);
  if (max_scaled == kNegInf) return c.front().id;  // nothing is possible; be deterministic
  weights.resize(c.size());
  double total = 0.0;
  for (size_t i = 0; i < c.size(); ++i) {
    weights[i] = std::exp(c[i].logit / temperature - max_scaled);
    total += weights[i];
  }
  const double target = u * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < c.size(); ++i) {
    cumulative += weights[i];
    if (cumulative > target) return c[i].id;
  }
  // Rounding can leave the sum just below target: take the last possible id.
  for (size_t i = c.size(); i-- > 0;) {
    if (weights[i] > 0.0f) return c[i].id;
  }
  return c.front().id;
}

}  // namespace

double SamplingUniform(uint64_t seed, uint64_t step) {
  const uint64_t start = Mix64(seed + kGoldenGamma);
  const uint64_t bits = Mix64(start + (step + 1) * kGoldenGamma);
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

void ApplyPenalties(const SamplingParams& params, absl::Span<float> logits,
                    absl::Span<const int32_t> history) {
  if (params.penalty_last_n <= 0 || history.empty()) return;
  if (params.repetition_penalty == 1.0f && params.presence_penalty == 0.0f &&
      params.frequency_penalty == 0.0f) {
    return;
  }
  const size_t n = std::min(static_cast<size_t>(params.penalty_last_n), history.size());
  std::vector<int32_t>& window = ThreadScratch().window;
  window.assign(history.end() - n, history.end());
  // Sorting groups equal ids, giving counts without a hash map.
  std::sort(window.begin(), window.end());
  for (size_t i = 0; i < window.size();) {
    const int32_t id = window[i];
    size_t j = i;
    while (j < window.size() && window[j] == id) ++j;
    const float count = static_cast<float>(j - i);
    i = j;
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
    float& l = logits[id];
    l = l <= 0.0f ? l * params.repetition_penalty : l / params.repetition_penalty;
    l -= count * params.frequency_penalty + params.presence_penalty;
  }
}

Sampler::Sampler(const SamplingParams& params) : params_(params) {
  DCHECK(ValidateSamplingParams(params).ok()) << ValidateSamplingParams(params);
}

int32_t Sampler::Sample(absl::Span<float> logits, absl::Span<const int32_t> history,
                        uint64_t step) const {
  CHECK(!logits.empty()) << "Sampler needs at least one logit";
  ApplyPenalties(params_, logits, history);
  if (params_.temperature <= 0.0f) return ArgMax(logits);

  Scratch& scratch = ThreadScratch();
  std::vector<Candidate>& c = scratch.candidates;
  FillCandidates(logits, c);
  bool sorted = false;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < c.size()) {
    TopK(static_cast<size_t>(params_.top_k), c);
    sorted = true;
  }
  if (params_.top_p < 1.0f) {
    TopP(params_.top_p, c, sorted);
    sorted = true;
  }
  if (params_.min_p > 0.0f) MinP(params_.min_p, c, sorted);
  return Draw(c, params_.temperature, SamplingUniform(params_.seed, step), scratch.weights);
}

}  // namespace pdserve
