#include "common/engine/logprobs.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace pdserve {
namespace {

TEST(LogprobsTest, LogSoftmaxOfTheChosenTokenAndTheTop) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 3.0f};
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + 2 * std::exp(3.0));
  const TokenLogprobs l = ComputeTokenLogprobs(logits, 0, 3);
  EXPECT_EQ(l.token, 0);
  EXPECT_NEAR(l.logprob, 1.0 - lse, 1e-6);
  ASSERT_EQ(l.top.size(), 3u);
  // Most likely first; the tie between 2 and 3 goes to the lower id.
  EXPECT_EQ(l.top[0].token, 2);
  EXPECT_EQ(l.top[1].token, 3);
  EXPECT_EQ(l.top[2].token, 1);
  EXPECT_NEAR(l.top[0].logprob, 3.0 - lse, 1e-6);
  EXPECT_EQ(l.top[0].logprob, l.top[1].logprob);
  EXPECT_NEAR(l.top[2].logprob, 2.0 - lse, 1e-6);
}

TEST(LogprobsTest, TopIsClampedToTheRowAndMayBeEmpty) {
  const std::vector<float> logits = {0.5f, -0.5f};
  EXPECT_TRUE(ComputeTokenLogprobs(logits, 1, 0).top.empty());
  const TokenLogprobs l = ComputeTokenLogprobs(logits, 1, 20);
  ASSERT_EQ(l.top.size(), 2u);
  EXPECT_EQ(l.top[0].token, 0);
  EXPECT_EQ(l.top[1].token, 1);
  EXPECT_EQ(l.top[1].logprob, l.logprob);  // computed the same way, so equal
  EXPECT_NEAR(std::exp(l.top[0].logprob) + std::exp(l.top[1].logprob), 1.0, 1e-6);
}

// Logits far outside exp's float range still normalize (the maximum is
// subtracted first), and a masked (-inf) token gets -inf without spoiling
// the others.
TEST(LogprobsTest, LargeAndMaskedLogits) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {1000.0f, 1000.0f, -inf};
  const TokenLogprobs l = ComputeTokenLogprobs(logits, 1, 3);
  EXPECT_NEAR(l.logprob, std::log(0.5), 1e-6);
  ASSERT_EQ(l.top.size(), 3u);
  EXPECT_NEAR(l.top[0].logprob, std::log(0.5), 1e-6);
  EXPECT_EQ(l.top[2].token, 2);
  EXPECT_EQ(l.top[2].logprob, -inf);
}

// The top of a vocabulary-sized row is its n largest entries, found by a
// single pass: check against a full sort.
TEST(LogprobsTest, TopMatchesAFullSort) {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) {
    logits[i] = static_cast<float>((i * 7919) % 1000) / 100.0f;  // a permutation of 0..9.99
  }
  const TokenLogprobs l = ComputeTokenLogprobs(logits, 0, 20);
  ASSERT_EQ(l.top.size(), 20u);
  for (size_t j = 0; j < l.top.size(); ++j) {
    // The j-th largest value is (999 - j) / 100.
    EXPECT_EQ(logits[static_cast<size_t>(l.top[j].token)], static_cast<float>(999 - j) / 100.0f)
        << j;
  }
}

}  // namespace
}  // namespace pdserve
