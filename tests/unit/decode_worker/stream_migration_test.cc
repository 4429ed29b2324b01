// The drain's choice of streams to move (decode_worker/stream_migration.h,
// migration_drain.h): a stream moves unless its own pace so far finishes
// it in time; a stream without a pace yet always moves.
#include "decode_worker/stream_migration.h"

#include "absl/time/time.h"
#include "decode_worker/migration_drain.h"
#include "gtest/gtest.h"

namespace pdserve::decode {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1000);

TEST(FinishesByTest, ThePaceSoFarDecides) {
  // 11 tokens in 1 s: 100 ms each; 40 left take 4 s.
  const absl::Time first = kNow - absl::Seconds(1);
  EXPECT_TRUE(FinishesBy(11, first, 51, kNow, kNow + absl::Seconds(4)));
  EXPECT_FALSE(FinishesBy(11, first, 51, kNow, kNow + absl::Seconds(4) - absl::Milliseconds(1)));
  // Nothing left: done in any window.
  EXPECT_TRUE(FinishesBy(51, first, 51, kNow, kNow));
}

TEST(FinishesByTest, OneTokenGivesNoPace) {
  EXPECT_FALSE(FinishesBy(1, kNow, 2, kNow, kNow + absl::Hours(1)));
  EXPECT_FALSE(FinishesBy(0, kNow, 2, kNow, kNow + absl::Hours(1)));
}

TEST(ParseDrainMigrationTest, NamesAndRefusals) {
  EXPECT_EQ(*ParseDrainMigration("auto"), DrainMigration::kAuto);
  EXPECT_EQ(*ParseDrainMigration("all"), DrainMigration::kAll);
  EXPECT_EQ(*ParseDrainMigration("off"), DrainMigration::kOff);
  const absl::StatusOr<DrainMigration> bad = ParseDrainMigration("sometimes");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("sometimes"), absl::string_view::npos);
}

}  // namespace
}  // namespace pdserve::decode
