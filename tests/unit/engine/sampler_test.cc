#include "common/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "absl/types/span.h"
#include "common/request/sampling_params.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

constexpr int kDraws = 10000;

// Samples `draws` times from a fresh copy of `logits` (Sample modifies its
// input) with steps 0..draws-1 and returns the histogram.
std::map<int32_t, int> Histogram(const SamplingParams& params, const std::vector<float>& logits,
                                 int draws, const std::vector<int32_t>& history = {}) {
  Sampler sampler(params);
  std::map<int32_t, int> counts;
  for (int step = 0; step < draws; ++step) {
    std::vector<float> scratch = logits;
    ++counts[sampler.Sample(absl::MakeSpan(scratch), history, step)];
  }
  return counts;
}

std::set<int32_t> Support(const std::map<int32_t, int>& h) {
  std::set<int32_t> ids;
  for (const auto& [id, n] : h) ids.insert(id);
  return ids;
}

SamplingParams Random(float temperature, uint64_t seed = 7) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

// Many near-equal logits so that every truncation sampler has work to do.
std::vector<float> Ramp(int n) {
  std::vector<float> l(n);
  for (int i = 0; i < n; ++i) l[i] = 0.01f * static_cast<float>((i * 37) % n);
  return l;
}

TEST(SamplerTest, GreedyPicksFirstMax) {
  Sampler sampler(SamplingParams{});
  std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
  EXPECT_EQ(sampler.Sample(absl::MakeSpan(logits), {}, 0), 1);
  std::vector<float> single = {-7.0f};
  EXPECT_EQ(sampler.Sample(absl::MakeSpan(single), {}, 0), 0);
}

TEST(SamplerTest, UniformIsPureFunctionOfSeedAndStep) {
  for (uint64_t step = 0; step < 100; ++step) {
    const double u = SamplingUniform(42, step);
    EXPECT_EQ(u, SamplingUniform(42, step));
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  double sum = 0.0;
  for (int step = 0; step < kDraws; ++step) sum += SamplingUniform(3, step);
  EXPECT_NEAR(sum / kDraws, 0.5, 0.02);
}

TEST(SamplerTest, SameSeedAndStepGiveSameTokenAcrossSamplersAndThreads) {
  const std::vector<float> logits = Ramp(1000);
  const SamplingParams params = Random(1.0f, 1234);
  std::vector<int32_t> a, b(200);
  Sampler first(params);
  for (int step = 0; step < 200; ++step) {
    std::vector<float> s = logits;
    a.push_back(first.Sample(absl::MakeSpan(s), {}, step));
  }
  // A second Sampler in another thread, visiting steps out of order, stands
  // in for a request that moved to another worker mid-generation.
  std::thread other([&] {
    Sampler second(params);
    for (int step = 199; step >= 0; --step) {
      std::vector<float> s = logits;
      b[step] = second.Sample(absl::MakeSpan(s), {}, step);
    }
  });
  other.join();
  EXPECT_EQ(a, b);
}

TEST(SamplerTest, DifferentSeedsDiffer) {
  const std::vector<float> logits(1000, 0.0f);
  Sampler s1(Random(1.0f, 1)), s2(Random(1.0f, 2));
  int same = 0;
  for (int step = 0; step < 1000; ++step) {
    std::vector<float> a = logits, b = logits;
    same += s1.Sample(absl::MakeSpan(a), {}, step) == s2.Sample(absl::MakeSpan(b), {}, step);
  }
  EXPECT_LT(same, 20);  // expected ~1 for 1000 equiprobable tokens
}

TEST(SamplerTest, TemperatureMatchesSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, 3.0f, -1.0f};
  for (float temperature : {0.5f, 1.0f, 2.0f}) {
    const auto h = Histogram(Random(temperature), logits, kDraws);
    double z = 0.0;
    for (float l : logits) z += std::exp(l / temperature);
    for (size_t i = 0; i < logits.size(); ++i) {
      const double expected = std::exp(logits[i] / temperature) / z;
      const auto it = h.find(static_cast<int32_t>(i));
      const double got = it == h.end() ? 0.0 : static_cast<double>(it->second) / kDraws;
      EXPECT_NEAR(got, expected, 0.02) << "T=" << temperature << " id=" << i;
    }
  }
}

TEST(SamplerTest, TopKOneIsGreedy) {
  SamplingParams p = Random(1.5f);
  p.top_k = 1;
  const std::vector<float> logits = Ramp(500);
  const int32_t best =
      static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  EXPECT_EQ(Support(Histogram(p, logits, 500)), std::set<int32_t>({best}));
}

TEST(SamplerTest, TopKKeepsOnlyTheKLargest) {
  SamplingParams p = Random(1.0f);
  p.top_k = 3;
  const std::vector<float> logits = {1.0f, 1.1f, 0.9f, 1.2f, 0.0f, 1.15f};
  EXPECT_EQ(Support(Histogram(p, logits, 2000)), std::set<int32_t>({1, 3, 5}));
}

TEST(SamplerTest, TinyTopPIsGreedy) {
  SamplingParams p = Random(1.0f);
  p.top_p = 1e-6f;
  const std::vector<float> logits = {0.1f, 0.3f, 0.29f, 0.2f};
  EXPECT_EQ(Support(Histogram(p, logits, 1000)), std::set<int32_t>({1}));
}

TEST(SamplerTest, TopPKeepsSmallestPrefixReachingP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: p = 0.75 needs the first two and
  // p = 0.8 includes the crossing token (cumulative exactly 0.8 >= 0.8).
  const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f),
                                     std::log(0.3f)};
  SamplingParams p = Random(1.0f);
  p.top_p = 0.75f;
  EXPECT_EQ(Support(Histogram(p, logits, 2000)), std::set<int32_t>({1, 3}));
  p.top_p = 0.85f;
  EXPECT_EQ(Support(Histogram(p, logits, 2000)), std::set<int32_t>({0, 1, 3}));
}

TEST(SamplerTest, TopPBreaksTiesByLowestId) {
  // 5000 equal logits: the nucleus of 0.5 is exactly ids 0..2499 because
  // ties resolve to the lowest ids.
  SamplingParams p = Random(1.0f);
  p.top_p = 0.5f;
  const auto h = Histogram(p, std::vector<float>(5000, 1.0f), 500);
  EXPECT_LT(h.rbegin()->first, 2500);
  EXPECT_GT(h.rbegin()->first, 2000);
}

// Ids of the smallest most-probable prefix with mass >= p, by full sort.
std::set<int32_t> NaiveNucleus(const std::vector<float>& logits, double p) {
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  double total = 0.0;
  for (float l : logits) total += std::exp(static_cast<double>(l) - logits[order[0]]);
  std::set<int32_t> kept;
  double cumulative = 0.0;
  for (int32_t id : order) {
    kept.insert(id);
    cumulative += std::exp(static_cast<double>(logits[id]) - logits[order[0]]);
    if (cumulative >= p * total) break;
  }
  return kept;
}

TEST(SamplerTest, TopPOnFullVocabularyMatchesFullSort) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(49152);
  for (float& l : logits) l = normal(rng);
  SamplingParams p = Random(1.0f);
  p.top_p = 0.9f;
  // Allow for rounding at the boundary: draws must come from the slightly
  // larger nucleus, and the slightly smaller one must be reachable.
  const std::set<int32_t> outer = NaiveNucleus(logits, 0.9 + 1e-4);
  const std::set<int32_t> inner = NaiveNucleus(logits, 0.9 - 1e-4);
  const auto h = Histogram(p, logits, 1000);
  int in_inner = 0;
  for (const auto& [id, n] : h) {
    EXPECT_TRUE(outer.count(id)) << id;
    in_inner += inner.count(id) ? n : 0;
  }
  EXPECT_GT(in_inner, 950);
}

TEST(SamplerTest, MinPNearOneIsGreedy) {
  SamplingParams p = Random(2.0f);
  p.min_p = 0.99f;
  const std::vector<float> logits = {0.1f, 0.3f, 0.25f, 0.2f};
  EXPECT_EQ(Support(Histogram(p, logits, 1000)), std::set<int32_t>({1}));
}

TEST(SamplerTest, MinPDropsTokensBelowFractionOfBest) {
  // Relative probabilities 1, 0.5, 0.2, 0.05; min_p 0.3 keeps the first two.
  const std::vector<float> logits = {std::log(0.2f), 0.0f, std::log(0.05f), std::log(0.5f)};
  SamplingParams p = Random(1.0f);
  p.min_p = 0.3f;
  EXPECT_EQ(Support(Histogram(p, logits, 2000)), std::set<int32_t>({1, 3}));
}

TEST(SamplerTest, RepetitionPenaltyAvoidsRepeatedToken) {
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  Sampler sampler(p);
  std::vector<float> logits = {2.0f, 1.9f, -1.0f};
  const std::vector<int32_t> history = {0, 0, 2};
  EXPECT_EQ(sampler.Sample(absl::MakeSpan(logits), history, 0), 1);
  EXPECT_FLOAT_EQ(logits[0], 2.0f / 1.5f);  // positive: divided, once per id
  EXPECT_FLOAT_EQ(logits[2], -1.5f);        // negative: multiplied
  EXPECT_FLOAT_EQ(logits[1], 1.9f);
}

TEST(SamplerTest, PresenceAndFrequencyPenalties) {
  SamplingParams p;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  ApplyPenalties(p, absl::MakeSpan(logits), {1, 3, 3, 3, 99, -4});
  EXPECT_FLOAT_EQ(logits[0], 1.0f);
  EXPECT_FLOAT_EQ(logits[1], 1.0f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(logits[2], 1.0f);
  EXPECT_FLOAT_EQ(logits[3], 1.0f - 0.5f - 3 * 0.25f);

  // Greedy follows the penalized logits: id 0 wins over the repeated id 1.
  Sampler sampler(p);
  std::vector<float> row = {1.0f, 1.2f};
  EXPECT_EQ(sampler.Sample(absl::MakeSpan(row), {1}, 0), 0);
}

TEST(SamplerTest, PenaltiesLookOnlyAtLastN) {
  SamplingParams p;
  p.frequency_penalty = 1.0f;
  p.penalty_last_n = 2;
  std::vector<float> logits = {0.0f, 0.0f, 0.0f};
  ApplyPenalties(p, absl::MakeSpan(logits), {0, 0, 1, 2});
  EXPECT_EQ(logits, std::vector<float>({0.0f, -1.0f, -1.0f}));

  p.penalty_last_n = 0;  // off
  std::vector<float> untouched = {0.0f, 0.0f, 0.0f};
  ApplyPenalties(p, absl::MakeSpan(untouched), {0, 1, 2});
  EXPECT_EQ(untouched, std::vector<float>({0.0f, 0.0f, 0.0f}));
}

TEST(SamplerTest, ChainAppliesPenaltiesBeforeTruncation) {
  // Without the penalty top_k=1 would always pick id 0.
  SamplingParams p = Random(1.0f);
  p.top_k = 1;
  p.presence_penalty = 2.0f;
  EXPECT_EQ(Support(Histogram(p, {3.0f, 2.0f, 0.0f}, 200, {0})), std::set<int32_t>({1}));
}

TEST(SamplerTest, NonFiniteLogitsAreNeverPicked) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {-inf, nan, 0.5f, -inf, 0.4f};
  SamplingParams p = Random(1.0f);
  EXPECT_EQ(Support(Histogram(p, logits, 1000)), std::set<int32_t>({2, 4}));
  p.top_p = 0.9f;
  p.min_p = 0.1f;
  EXPECT_EQ(Support(Histogram(p, logits, 1000)), std::set<int32_t>({2, 4}));
}

}  // namespace
}  // namespace pdserve
