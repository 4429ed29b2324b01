// The circuit-breaking policy as a table of (state, outcome, time) -> state,
// and the per-worker bookkeeping of CircuitBreaker.
#include "router/pool/circuit_breaker.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdserve::router {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kT0 = absl::FromUnixSeconds(1000);
const CircuitBreakerOptions kOptions{3, absl::Seconds(5)};

struct Row {
  const char* name;
  BreakerState before;
  bool success;
  absl::Time now;
  int want_failures;
  absl::Time want_ejected_until;
  absl::Time attempt_started = absl::InfiniteFuture();
};

TEST(NextBreakerStateTest, Table) {
  const absl::Time never = absl::InfinitePast();
  const Row rows[] = {
      {"first failure counts", {0, never}, false, kT0, 1, never},
      {"below threshold stays closed", {1, never}, false, kT0, 2, never},
      {"threshold ejects for the cool-down", {2, never}, false, kT0, 3, kT0 + absl::Seconds(5)},
      {"success resets the count", {2, never}, true, kT0, 0, never},
      {"success closes an open circuit", {3, kT0 + absl::Seconds(5)}, true, kT0, 0, never},
      {"failures while ejected do not extend it",
       {3, kT0 + absl::Seconds(5)},
       false,
       kT0 + absl::Seconds(1),
       3,
       kT0 + absl::Seconds(5)},
      {"first failure after the cool-down re-ejects",
       {3, kT0 + absl::Seconds(5)},
       false,
       kT0 + absl::Seconds(6),
       4,
       kT0 + absl::Seconds(11)},
      {"an attempt sent before the last failure is the same incident",
       {1, never, kT0},
       false,
       kT0 + absl::Milliseconds(5),
       1,
       never,
       kT0 - absl::Seconds(1)},
      {"an attempt sent after it counts",
       {1, never, kT0},
       false,
       kT0 + absl::Seconds(1),
       2,
       never,
       kT0 + absl::Milliseconds(500)},
  };
  for (const Row& r : rows) {
    const BreakerState got =
        NextBreakerState(r.before, r.success, r.now, kOptions, r.attempt_started);
    EXPECT_EQ(got.consecutive_failures, r.want_failures) << r.name;
    EXPECT_EQ(got.ejected_until, r.want_ejected_until) << r.name;
  }
}

TEST(NextBreakerStateTest, ThresholdZeroDisables) {
  BreakerState s;
  for (int i = 0; i < 10; ++i) s = NextBreakerState(s, false, kT0, {0, absl::Seconds(5)});
  EXPECT_FALSE(s.ejected(kT0));
}

TEST(CircuitBreakerTest, EjectsOnlyTheFailingWorkerUntilCoolDown) {
  CircuitBreaker breaker(kOptions);
  EXPECT_FALSE(breaker.RecordFailure("a:1", kT0));
  EXPECT_FALSE(breaker.RecordFailure("b:1", kT0));
  EXPECT_FALSE(breaker.RecordFailure("a:1", kT0));
  EXPECT_TRUE(breaker.RecordFailure("a:1", kT0));   // ejected now
  EXPECT_FALSE(breaker.RecordFailure("a:1", kT0));  // already ejected
  EXPECT_THAT(breaker.Ejected(kT0 + absl::Seconds(4)), ElementsAre("a:1"));
  EXPECT_THAT(breaker.Ejected(kT0 + absl::Seconds(5)), IsEmpty());
}

TEST(CircuitBreakerTest, SuccessInBetweenKeepsTheCircuitClosed) {
  CircuitBreaker breaker(kOptions);
  for (int i = 0; i < 10; ++i) {
    breaker.RecordFailure("a:1", kT0);
    breaker.RecordFailure("a:1", kT0);
    breaker.RecordSuccess("a:1");
  }
  EXPECT_THAT(breaker.Ejected(kT0), IsEmpty());
}

// One crash fails every request in flight on the worker at once: that is
// one failure, not one per request, so the restarted worker is not ejected.
TEST(CircuitBreakerTest, RequestsInFlightWhenAWorkerDiesCountOnce) {
  CircuitBreaker breaker(kOptions);
  const absl::Time sent = kT0 - absl::Seconds(1);
  for (int i = 0; i < 8; ++i) {
    EXPECT_FALSE(breaker.RecordFailure("a:1", kT0 + absl::Milliseconds(i), sent));
  }
  EXPECT_THAT(breaker.Ejected(kT0 + absl::Seconds(1)), IsEmpty());
  // Requests sent after that keep failing: consecutive failures eject it.
  EXPECT_FALSE(breaker.RecordFailure("a:1", kT0 + absl::Seconds(2), kT0 + absl::Seconds(1)));
  EXPECT_TRUE(breaker.RecordFailure("a:1", kT0 + absl::Seconds(3), kT0 + absl::Seconds(2)));
}

}  // namespace
}  // namespace pdserve::router
