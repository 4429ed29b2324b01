#include "common/runtime/device_spec.h"

#include "common/runtime/runtime_factory.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

TEST(DeviceSpecTest, ParsesTheAcceptedSpellings) {
  struct Case {
    const char* text;
    DeviceSpec::Kind kind;
    int ordinal;
  };
  for (const Case& c : {Case{"cpu", DeviceSpec::Kind::kCpu, 0},
                        Case{"cuda", DeviceSpec::Kind::kCuda, 0},
                        Case{"cuda:0", DeviceSpec::Kind::kCuda, 0},
                        Case{"cuda:7", DeviceSpec::Kind::kCuda, 7},
                        Case{"cuda:12", DeviceSpec::Kind::kCuda, 12}}) {
    absl::StatusOr<DeviceSpec> spec = DeviceSpec::Parse(c.text);
    ASSERT_TRUE(spec.ok()) << c.text << ": " << spec.status();
    EXPECT_EQ(spec->kind, c.kind) << c.text;
    EXPECT_EQ(spec->ordinal, c.ordinal) << c.text;
  }
  EXPECT_EQ(DeviceSpec::Parse("cuda:3")->ToString(), "cuda:3");
  EXPECT_EQ(DeviceSpec::Parse("cpu")->ToString(), "cpu");
}

TEST(DeviceSpecTest, RefusesAnythingElse) {
  for (const char* text : {"", "gpu", "CUDA", "cuda:", "cuda:-1", "cuda:x", "cuda:1x",
                           "cuda:99999", "cpu:0", " cpu"}) {
    EXPECT_EQ(DeviceSpec::Parse(text).status().code(), absl::StatusCode::kInvalidArgument)
        << "\"" << text << "\"";
  }
}

TEST(RuntimeFactoryTest, CpuIsAlwaysUsable) {
  EXPECT_TRUE(CheckDeviceUsable(DeviceSpec{}).ok());
  KvLayout layout;
  layout.n_layers = 2;
  layout.n_kv_heads = 1;
  layout.head_dim = 4;
  absl::StatusOr<std::unique_ptr<KvCache>> cache = CreateKvCache(DeviceSpec{}, layout, 4);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_FALSE((*cache)->on_device());
}

// Without CUDA in the build, or without a visible device, a cuda device is
// refused with a status that says why (never a crash or a silent CPU run).
TEST(RuntimeFactoryTest, UnusableCudaDeviceIsAClearError) {
  const DeviceSpec far{DeviceSpec::Kind::kCuda, 999};
  const absl::Status st = CheckDeviceUsable(far);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(st.code() == absl::StatusCode::kFailedPrecondition ||
              st.code() == absl::StatusCode::kUnavailable)
      << st;
  KvLayout layout;
  layout.n_layers = 2;
  layout.n_kv_heads = 1;
  layout.head_dim = 4;
  EXPECT_FALSE(CreateKvCache(far, layout, 4).ok());
}

}  // namespace
}  // namespace pdserve
