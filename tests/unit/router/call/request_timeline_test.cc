// RequestTimeline: the inter-token latencies behind the ITL histogram.
#include "router/call/request_timeline.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdserve::router {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(RequestTimelineTest, InterTokenLatencyIsTheGapPerToken) {
  RequestTimeline t(kT0);
  t.MarkTokens(kT0 + absl::Milliseconds(100), 2);  // first event: TTFT, no gap yet
  t.MarkTokens(kT0 + absl::Milliseconds(100), 0);  // empty events are ignored
  t.MarkTokens(kT0 + absl::Milliseconds(130), 1);
  t.MarkTokens(kT0 + absl::Milliseconds(190), 3);  // 60 ms over 3 tokens
  EXPECT_THAT(t.inter_token_seconds(), ElementsAre(DoubleEq(0.03), DoubleEq(0.02)));
  const v1::Timings timings = t.Merge(v1::Timings(), nullptr, true, kT0 + absl::Seconds(1));
  EXPECT_DOUBLE_EQ(timings.ttft_ms(), 100);
}

TEST(RequestTimelineTest, NoTokensNoLatencies) {
  RequestTimeline t(kT0);
  t.MarkTokens(kT0 + absl::Milliseconds(5), 0);
  EXPECT_TRUE(t.inter_token_seconds().empty());
  EXPECT_DOUBLE_EQ(t.Merge(v1::Timings(), nullptr, true, kT0).ttft_ms(), 0);
}

}  // namespace
}  // namespace pdserve::router
