// The TCP transport between caches whose pools are "device" memory: the
// sender stages blocks through host copies and the receiver copies staged
// payloads into the blocks. The device is tests/unit/fake_device_memory.h.
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/kv/framed_kv_receiver.h"
#include "common/kv/framed_kv_sender.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_device_memory.h"
#include "tests/testing/kv_test_util.h"

namespace pdserve {
namespace {

using ::pdserve::testing::DoneProbe;
using ::pdserve::testing::SendAllLayers;
using ::pdserve::testing::FakeDeviceCounters;
using ::pdserve::testing::FakeDeviceMemory;
using ::pdserve::testing::MakeFakeDeviceCache;
using ::pdserve::testing::SameBlock;
using ::pdserve::testing::SmallKvLayout;

std::unique_ptr<KvCache> MakeDeviceCache(int32_t blocks, uint32_t seed,
                                         FakeDeviceCounters* counters) {
  return MakeFakeDeviceCache(SmallKvLayout(), blocks, seed, counters);
}

class FramedKvDeviceStagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FramedKvReceiverOptions options;
    options.listen_address = "127.0.0.1:0";
    auto receiver = FramedKvReceiver::Create(dst_.get(), options);
    ASSERT_TRUE(receiver.ok()) << receiver.status();
    receiver_ = std::move(receiver).value();
    auto sender = FramedKvSender::Create();
    ASSERT_TRUE(sender.ok()) << sender.status();
    sender_ = std::move(sender).value();
  }

  KvTransferTarget Target(uint64_t id) {
    return KvTransferTarget{absl::StrCat("127.0.0.1:", receiver_->port()), id, 1,
                            absl::Now() + absl::Seconds(10)};
  }

  absl::Status Transfer(uint64_t id, const std::vector<int32_t>& src,
                        const std::vector<int32_t>& dst, DoneProbe& probe) {
    const absl::Status st = receiver_->Expect(id, 1, dst, src_->layout().n_layers,
                                              absl::Now() + absl::Seconds(10), probe.Callback());
    return st.ok() ? SendAllLayers(*sender_, Target(id), *src_, src, 7) : st;
  }

  FakeDeviceCounters src_counters_, dst_counters_;
  std::unique_ptr<KvCache> src_ = MakeDeviceCache(8, 11, &src_counters_);
  std::unique_ptr<KvCache> dst_ = MakeDeviceCache(8, 22, &dst_counters_);
  std::unique_ptr<FramedKvReceiver> receiver_;
  std::unique_ptr<FramedKvSender> sender_;
};

TEST_F(FramedKvDeviceStagingTest, BlocksArriveThroughHostStaging) {
  const std::vector<int32_t> src = {5, 1, 6};
  const std::vector<int32_t> dst = {2, 7, 0};
  DoneProbe probe;
  ASSERT_TRUE(Transfer(1, src, dst, probe).ok());
  ASSERT_TRUE(probe.Wait().ok());
  const int layers = src_->layout().n_layers;
  for (int l = 0; l < layers; ++l) {
    for (size_t i = 0; i < src.size(); ++i) {
      EXPECT_TRUE(SameBlock(*src_, src[i], *dst_, dst[i], l)) << "layer " << l << " block " << i;
    }
  }
  // Every layer-block went device -> host on P and host -> device on D.
  EXPECT_EQ(src_counters_.to_host.load(), layers * static_cast<int>(src.size()));
  EXPECT_EQ(dst_counters_.from_host.load(), layers * static_cast<int>(src.size()));
  EXPECT_EQ(receiver_->num_pending(), 0u);
}

TEST_F(FramedKvDeviceStagingTest, FailedDeviceCopyEndsTransferAndReceiverKeepsServing) {
  dst_counters_.fail_from_host = true;
  DoneProbe failed;
  EXPECT_FALSE(Transfer(1, {0, 1}, {3, 4}, failed).ok());
  const absl::StatusOr<KvCommit> result = failed.Wait();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss) << result.status();
  EXPECT_EQ(failed.calls(), 1);
  EXPECT_EQ(receiver_->num_pending(), 0u);

  dst_counters_.fail_from_host = false;
  DoneProbe ok;
  ASSERT_TRUE(Transfer(2, {2}, {5}, ok).ok());
  ASSERT_TRUE(ok.Wait().ok());
  EXPECT_TRUE(SameBlock(*src_, 2, *dst_, 5, 0));
}

TEST(KvCacheDeviceMemoryTest, TooSmallMemoryIsRefused) {
  FakeDeviceCounters counters;
  const KvLayout layout = SmallKvLayout();
  auto memory =
      std::make_unique<FakeDeviceMemory>(KvCache::PoolBytes(layout, 4) - 1, &counters);
  EXPECT_EQ(KvCache::Create(layout, 4, std::move(memory)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pdserve
