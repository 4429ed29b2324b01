#include "common/engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "glog/logging.h"

namespace pdserve {
namespace {

// log(sum(exp(x))) over the row. The maximum is subtracted before exp so no
// term overflows, and the sum is kept in double: a large vocabulary adds up
// ~10^5 small terms, which float would round away.
double LogSumExp(absl::Span<const float> logits) {
  double max = -std::numeric_limits<double>::infinity();
  for (float x : logits) max = std::max(max, static_cast<double>(x));
  if (!std::isfinite(max)) return max;  // empty or all -inf: nothing to normalize
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  return max + std::log(sum);
}

struct Candidate {
  float logit;
  int32_t token;
};

// The n largest logits, largest first. A candidate goes after every kept one
// with an equal logit, and ids are visited in increasing order, so ties keep
// the lower id first. Insertion into a list of at most n (<= 20) entries
// beats sorting the vocabulary: after the first few hundred ids almost
// every logit is below the n-th largest and costs one comparison.
std::vector<Candidate> LargestLogits(absl::Span<const float> logits, size_t n) {
  std::vector<Candidate> top;
  if (n == 0) return top;
  top.reserve(n + 1);
  const auto before = [](float logit, const Candidate& c) { return logit > c.logit; };
  for (size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i];
    if (top.size() == n && !(x > top.back().logit)) continue;
    top.insert(std::upper_bound(top.begin(), top.end(), x, before),
               Candidate{x, static_cast<int32_t>(i)});
    if (top.size() > n) top.pop_back();
  }
  return top;
}

}  // namespace

TokenLogprobs ComputeTokenLogprobs(absl::Span<const float> logits, int32_t token, int32_t top_n) {
  DCHECK_GE(token, 0);
  DCHECK_LT(static_cast<size_t>(token), logits.size());
  DCHECK_GE(top_n, 0);
  const double lse = LogSumExp(logits);
  TokenLogprobs out;
  out.token = token;
  out.logprob = static_cast<float>(static_cast<double>(logits[static_cast<size_t>(token)]) - lse);
  const size_t n = std::min(static_cast<size_t>(std::max(top_n, 0)), logits.size());
  for (const Candidate& c : LargestLogits(logits, n)) {
    out.top.push_back({c.token, static_cast<float>(static_cast<double>(c.logit) - lse)});
  }
  return out;
}

}  // namespace pdserve
