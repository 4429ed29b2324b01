#include "common/request/sampling_params.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/request/sampling_proto.h"
#include "common/request/token_logprobs.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(SamplingParamsTest, DefaultsAreValidAndGreedy) {
  SamplingParams p;
  EXPECT_TRUE(ValidateSamplingParams(p).ok());
  EXPECT_EQ(p.temperature, 0.0f);
}

TEST(SamplingParamsTest, BoundaryValuesAreAccepted) {
  SamplingParams p;
  p.temperature = 100.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.repetition_penalty = 10.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.penalty_last_n = 0;
  EXPECT_TRUE(ValidateSamplingParams(p).ok());
  p.top_p = 1e-6f;
  p.min_p = 0.0f;
  p.repetition_penalty = 1e-3f;
  p.presence_penalty = 2.0f;
  p.frequency_penalty = -2.0f;
  p.top_k = 1;
  EXPECT_TRUE(ValidateSamplingParams(p).ok());
}

struct InvalidCase {
  std::string field;
  std::function<void(SamplingParams&)> mutate;
};

std::vector<InvalidCase> InvalidCases() {
  return {
      {"temperature", [](SamplingParams& p) { p.temperature = -0.1f; }},
      {"temperature", [](SamplingParams& p) { p.temperature = 100.5f; }},
      {"temperature", [](SamplingParams& p) { p.temperature = kNaN; }},
      {"temperature", [](SamplingParams& p) { p.temperature = kInf; }},
      {"top_k", [](SamplingParams& p) { p.top_k = -1; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 0.0f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = -0.5f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.01f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = kNaN; }},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.01f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.5f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = kNaN; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0.0f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = -1.0f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 10.5f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = kNaN; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = kInf; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = 2.5f; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = -2.5f; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = kNaN; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = 2.01f; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = -kInf; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = kNaN; }},
      {"penalty_last_n", [](SamplingParams& p) { p.penalty_last_n = -1; }},
      {"logprobs", [](SamplingParams& p) { p.logprobs = -2; }},
      {"logprobs", [](SamplingParams& p) { p.logprobs = kMaxLogprobs + 1; }},
  };
}

TEST(SamplingParamsTest, EachInvalidFieldIsRejectedByName) {
  for (const InvalidCase& c : InvalidCases()) {
    SamplingParams p;
    c.mutate(p);
    const absl::Status s = ValidateSamplingParams(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field << ": " << s;
    EXPECT_NE(s.message().find("sampling." + c.field + " "), std::string::npos)
        << "message should name " << c.field << ": " << s.message();
  }
}

// -1 is "none"; 0 asks for the chosen token's logprob alone.
TEST(SamplingParamsTest, LogprobsRange) {
  SamplingParams p;
  EXPECT_EQ(p.logprobs, -1);
  for (int32_t n : {-1, 0, 1, kMaxLogprobs}) {
    p.logprobs = n;
    EXPECT_TRUE(ValidateSamplingParams(p).ok()) << n;
  }
  EXPECT_EQ(kMaxLogprobs, 20);  // OpenAI's top_logprobs limit
}

// Unset on the wire is -1 ("none") in the struct and back, and a set value,
// 0 included, survives the round trip.
TEST(SamplingParamsTest, LogprobsProtoRoundTrip) {
  v1::SamplingParams wire;
  EXPECT_EQ(FromProto(wire).logprobs, -1);
  EXPECT_FALSE(ToProto(SamplingParams{}).has_logprobs());
  for (int32_t n : {0, 5, kMaxLogprobs}) {
    wire.set_logprobs(n);
    const SamplingParams s = FromProto(wire);
    EXPECT_EQ(s.logprobs, n);
    const v1::SamplingParams back = ToProto(s);
    ASSERT_TRUE(back.has_logprobs()) << n;
    EXPECT_EQ(back.logprobs(), n);
  }
}

// Unset (the worker's default), on and off all survive the round trip.
TEST(SamplingParamsTest, SpeculativeProtoRoundTrip) {
  v1::SamplingParams wire;
  EXPECT_FALSE(FromProto(wire).speculative.has_value());
  EXPECT_FALSE(ToProto(SamplingParams{}).has_speculative());
  for (bool on : {false, true}) {
    wire.set_speculative(on);
    const SamplingParams s = FromProto(wire);
    ASSERT_TRUE(s.speculative.has_value());
    EXPECT_EQ(*s.speculative, on);
    const v1::SamplingParams back = ToProto(s);
    ASSERT_TRUE(back.has_speculative());
    EXPECT_EQ(back.speculative(), on);
  }
}

TEST(SamplingParamsTest, TokenLogprobsProtoRoundTrip) {
  TokenLogprobs l;
  l.token = 7;
  l.logprob = -0.25f;
  l.top = {{3, -0.125f}, {7, -0.25f}, {1, -4.5f}};
  const v1::TokenLogprobs wire = ToProto(l);
  EXPECT_EQ(wire.token(), 7);
  EXPECT_EQ(wire.logprob(), -0.25f);
  ASSERT_EQ(wire.top_size(), 3);
  EXPECT_EQ(wire.top(0).token(), 3);
  EXPECT_EQ(wire.top(2).logprob(), -4.5f);
  EXPECT_EQ(FromProto(wire), l);
  l.top.clear();  // logprobs = 0: the chosen token only
  EXPECT_EQ(FromProto(ToProto(l)), l);
}

}  // namespace
}  // namespace pdserve
