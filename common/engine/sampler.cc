#include "common/engine/sampler.h"

#include <algorithm>
#include <array>
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
// Top-p groups candidates by distance below the best logit, 1/32 logit per
// bucket; anything more than 32 logits down (relative probability < 1e-13)
// shares the last bucket. Only the bucket where the nucleus ends is sorted.
constexpr int kTopPBuckets = 1024;
constexpr float kTopPBucketsPerLogit = 32.0f;
// Above this share of the vocabulary a bounded heap stops paying off.
constexpr size_t kTopKHeapMaxFraction = 8;

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

// A strict total order (ties broken by id). Every selection below produces
// a set that is a prefix of this order and keeps survivors in a
// deterministic sequence, so the draw never depends on the algorithm or the
// standard library.
bool Before(const Candidate& a, const Candidate& b) {
  if (a.logit != b.logit) return a.logit > b.logit;
  return a.id < b.id;
}

// NaN would break the strict ordering the sorts rely on; it means "never".
float Sanitize(float logit) { return std::isnan(logit) ? kNegInf : logit; }

struct Scratch {
  std::vector<Candidate> candidates;
  std::vector<Candidate> crossing;
  std::vector<float> weights;
  std::vector<int32_t> window;
};

// Per-thread buffers: a 49152-entry vocabulary would otherwise cost several
// large allocations per generated token.
Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// Two passes: a lane-wise max the compiler vectorizes, then the first index
// holding it (llama.cpp's tie rule), about 3x faster than one branchy scan.
int32_t ArgMax(absl::Span<const float> logits) {
  constexpr size_t kLanes = 16;
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, kNegInf);
  const size_t n = logits.size();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      lanes[j] = logits[i + j] > lanes[j] ? logits[i + j] : lanes[j];
    }
  }
  float best = kNegInf;
  for (float lane : lanes) best = lane > best ? lane : best;
  for (; i < n; ++i) best = logits[i] > best ? logits[i] : best;
  for (size_t k = 0; k < n; ++k) {
    if (logits[k] == best) return static_cast<int32_t>(k);
  }
  return 0;  // every logit is NaN
}

void FillCandidates(absl::Span<const float> logits, std::vector<Candidate>& out) {
  out.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    out[i] = Candidate{Sanitize(logits[i]), static_cast<int32_t>(i)};
  }
}

// Fills `out` with the k best candidates, best first. For small k a bounded
// heap reads each logit once and almost never rebalances.
void TopK(absl::Span<const float> logits, size_t k, std::vector<Candidate>& out) {
  if (k * kTopKHeapMaxFraction > logits.size()) {
    FillCandidates(logits, out);
    std::nth_element(out.begin(), out.begin() + k, out.end(), Before);
    out.resize(k);
  } else {
    out.clear();
    for (size_t i = 0; i < logits.size(); ++i) {
      const Candidate x{Sanitize(logits[i]), static_cast<int32_t>(i)};
      if (out.size() < k) {
        out.push_back(x);
        std::push_heap(out.begin(), out.end(), Before);  // front = worst kept
      } else if (Before(x, out.front())) {
        std::pop_heap(out.begin(), out.end(), Before);
        out.back() = x;
        std::push_heap(out.begin(), out.end(), Before);
      }
    }
  }
  std::sort(out.begin(), out.end(), Before);
}

float MaxLogit(const std::vector<Candidate>& c) {
  float best = kNegInf;
  for (const Candidate& x : c) best = std::max(best, x.logit);
  return best;
}

int TopPBucket(float max_logit, float logit) {
  const float d = (max_logit - logit) * kTopPBucketsPerLogit;
  return d < static_cast<float>(kTopPBuckets - 1) ? static_cast<int>(d) : kTopPBuckets - 1;
}

// Keeps the smallest prefix (in Before order) whose probability mass reaches
// p, the crossing token included (llama.cpp's rule), without sorting the
// whole vocabulary. Survivors keep their relative order.
void TopP(float p, std::vector<Candidate>& c, std::vector<Candidate>& crossing) {
  const float max_logit = MaxLogit(c);
  if (max_logit == kNegInf) return;
  std::array<double, kTopPBuckets> mass{};
  double total = 0.0;
  for (const Candidate& x : c) {
    const double w = std::exp(x.logit - max_logit);
    mass[TopPBucket(max_logit, x.logit)] += w;
    total += w;
  }
  const double target = static_cast<double>(p) * total;
  double cumulative = 0.0;
  int cross = 0;
  for (; cross < kTopPBuckets - 1 && cumulative + mass[cross] < target; ++cross) {
    cumulative += mass[cross];
  }
  crossing.clear();
  for (const Candidate& x : c) {
    if (TopPBucket(max_logit, x.logit) == cross) crossing.push_back(x);
  }
  std::sort(crossing.begin(), crossing.end(), Before);
  Candidate last = crossing.back();  // rounding fell short: keep the bucket
  for (const Candidate& x : crossing) {
    cumulative += std::exp(x.logit - max_logit);
    if (cumulative >= target) {
      last = x;
      break;
    }
  }
  c.erase(std::remove_if(c.begin(), c.end(),
                         [&](const Candidate& x) {
                           const int b = TopPBucket(max_logit, x.logit);
                           return b > cross || (b == cross && Before(last, x));
                         }),
          c.end());
}

// Keeps tokens whose probability is at least p times the best one, i.e.
// logit >= max + ln(p). The filter is stable, so the order stays canonical.
void MinP(float p, std::vector<Candidate>& c) {
  const float min_logit = MaxLogit(c) + std::log(p);
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
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < logits.size()) {
    TopK(logits, static_cast<size_t>(params_.top_k), c);
  } else {
    FillCandidates(logits, c);
  }
  if (params_.top_p < 1.0f) TopP(params_.top_p, c, scratch.crossing);
  if (params_.min_p > 0.0f) MinP(params_.min_p, c);
  return Draw(c, params_.temperature, SamplingUniform(params_.seed, step), scratch.weights);
}

}  // namespace pdserve
