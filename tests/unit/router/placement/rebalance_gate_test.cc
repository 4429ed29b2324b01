// RebalanceGate: one move off a worker per spacing, workers independent.
#include "router/placement/rebalance_gate.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace pdserve::router {
namespace {

TEST(RebalanceGateTest, OneMovePerWorkerPerSpacing) {
  RebalanceGate gate(absl::Seconds(1));
  const absl::Time t0 = absl::FromUnixSeconds(100);
  EXPECT_TRUE(gate.TryStart("d1", t0));
  EXPECT_FALSE(gate.TryStart("d1", t0 + absl::Milliseconds(999)));
  EXPECT_TRUE(gate.TryStart("d2", t0 + absl::Milliseconds(1)));
  EXPECT_TRUE(gate.TryStart("d1", t0 + absl::Seconds(1)));
  EXPECT_FALSE(gate.TryStart("d1", t0 + absl::Milliseconds(1500)));
}

}  // namespace
}  // namespace pdserve::router
