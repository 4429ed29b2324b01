#include "common/engine/step_cost_model.h"

#include "gtest/gtest.h"

namespace pdserve {
namespace {

TEST(StepCostModelTest, FitsTheLineOfItsSteps) {
  StepCostModel m;
  EXPECT_FALSE(m.ready());
  for (int i = 0; i < 20; ++i) {
    const int rows = 1 + i % 6;
    m.Observe(rows, 0.010 + 0.004 * rows);
  }
  ASSERT_TRUE(m.ready());
  EXPECT_NEAR(m.per_row(), 0.004, 1e-9);
  EXPECT_NEAR(m.StepSeconds(8), 0.042, 1e-9);
}

TEST(StepCostModelTest, OneStepSizeGivesNoSlope) {
  StepCostModel m;
  for (int i = 0; i < 50; ++i) m.Observe(8, 0.05);
  EXPECT_FALSE(m.ready());
}

TEST(StepCostModelTest, RecentStepsOutweighOldOnes) {
  StepCostModel m;
  for (int i = 0; i < 200; ++i) m.Observe(1 + i % 4, 0.001 * (1 + i % 4));  // cheap rows
  for (int i = 0; i < 200; ++i) m.Observe(1 + i % 4, 0.010 * (1 + i % 4));  // then dear ones
  ASSERT_TRUE(m.ready());
  EXPECT_NEAR(m.per_row(), 0.010, 1e-4);
}

TEST(StepCostModelTest, NeverPredictsLessThanTheRows) {
  StepCostModel m;
  m.Observe(1, 0.0);
  m.Observe(5, 0.020);
  m.Observe(1, 0.0);
  m.Observe(5, 0.020);
  ASSERT_TRUE(m.ready());
  EXPECT_GE(m.per_row(), 0.0);
  EXPECT_GT(m.StepSeconds(1), 0.0);
}

}  // namespace
}  // namespace pdserve
