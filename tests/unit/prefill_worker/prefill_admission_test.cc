// PrefillAdmission refuses a prompt only when more than one step of prompt
// tokens is queued ahead of it and the measured rate says it would not
// start before its deadline.
#include "prefill_worker/prefill_admission.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdserve::prefill {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1000);

struct Case {
  const char* name;
  int64_t ahead;        // prompt tokens already admitted
  int64_t prompt;       // this prompt's tokens
  double rate;          // tokens per second, 0 = not measured
  absl::Duration left;  // until the call's deadline
  bool admitted;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class PrefillAdmissionTest : public ::testing::TestWithParam<Case> {};

TEST_P(PrefillAdmissionTest, AdmitsWhatCanStartInTime) {
  const Case& c = GetParam();
  PrefillAdmission a;
  if (c.ahead > 0) ASSERT_TRUE(a.Admit(c.ahead, 0, kNow, absl::InfiniteFuture()).ok());
  const absl::Time deadline =
      c.left == absl::InfiniteDuration() ? absl::InfiniteFuture() : kNow + c.left;
  const absl::Status s = a.Admit(c.prompt, c.rate, kNow, deadline);
  EXPECT_EQ(s.ok(), c.admitted) << s;
  EXPECT_EQ(a.admitted_tokens(), c.ahead + (c.admitted ? c.prompt : 0));
  EXPECT_EQ(a.refused(), c.admitted ? 0 : 1);
  if (!c.admitted) {
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("prefill queue too long"));
  }
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Cases, PrefillAdmissionTest,
    ::testing::Values(
        // Steps of 512 prompt tokens (the default).
        Case{"EmptyQueueAlwaysAdmits", 0, 100000, 100, absl::Seconds(1), true},
        Case{"StartsInTheNextStepAdmits", 512, 100000, 1, absl::Seconds(1), true},
        Case{"NoRateYetAdmits", 5000, 1000, 0, absl::Seconds(1), true},
        Case{"NoDeadlineAdmits", 5000, 1000, 100, absl::InfiniteDuration(), true},
        Case{"StartsBeforeTheDeadlineAdmits", 3512, 1000, 1000, absl::Seconds(5), true},
        Case{"StartsExactlyAtTheDeadlineAdmits", 5512, 1000, 1000, absl::Seconds(5), true},
        Case{"StartsAfterTheDeadlineRefuses", 6512, 1000, 1000, absl::Seconds(5), false},
        Case{"OwnLengthDoesNotCount", 1000, 500000, 1000, absl::Seconds(1), true}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });
// clang-format on

TEST(PrefillAdmissionTest, ReleaseMakesRoomAgain) {
  PrefillAdmission a;
  const absl::Time deadline = kNow + absl::Seconds(2);
  ASSERT_TRUE(a.Admit(3000, 1000, kNow, deadline).ok());  // nothing ahead
  EXPECT_FALSE(a.Admit(500, 1000, kNow, deadline).ok());  // starts in 2.5 s > 2 s
  a.Release(3000);
  EXPECT_EQ(a.admitted_tokens(), 0);
  EXPECT_TRUE(a.Admit(500, 1000, kNow, deadline).ok());
}

}  // namespace
}  // namespace pdserve::prefill
