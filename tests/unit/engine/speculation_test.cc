#include "common/engine/speculation.h"

#include "gtest/gtest.h"

namespace pdserve {
namespace {

TEST(SpeculationTest, ARowIsPricedAgainstATokenOfAPlainStep) {
  // A 10 ms step of one sequence, rows at 4 ms: a draft token must be kept
  // with chance over 0.4; eight sequences sharing a 40 ms step: over 0.8.
  EXPECT_DOUBLE_EQ(RowPriceThreshold(0.004, 0.010, 1), 0.4);
  EXPECT_DOUBLE_EQ(RowPriceThreshold(0.004, 0.040, 8), 0.8);
  EXPECT_DOUBLE_EQ(RowPriceThreshold(0.010, 0.040, 8), 1.0);  // a row costs more than a token
  EXPECT_DOUBLE_EQ(RowPriceThreshold(0.0, 0.040, 8), 0.0);    // free rows
  EXPECT_DOUBLE_EQ(RowPriceThreshold(0.004, 0.0, 8), 1.0);
}

TEST(SpeculationTest, DraftsAreAsLongAsTheirLastPositionPays) {
  // 0.9^j > 0.5 for j <= 6.
  EXPECT_EQ(WorthwhileDraftLength(0.9, 0.5, 8), 6);
  EXPECT_EQ(WorthwhileDraftLength(0.9, 0.5, 3), 3);
  EXPECT_EQ(WorthwhileDraftLength(0.9, 0.95, 8), 0);
  EXPECT_EQ(WorthwhileDraftLength(0.9, 1.0, 8), 0);
  EXPECT_EQ(WorthwhileDraftLength(0.5, 0.0, 8), 8);
  EXPECT_EQ(WorthwhileDraftLength(1.0, 0.99, 8), 8);
}

}  // namespace
}  // namespace pdserve
