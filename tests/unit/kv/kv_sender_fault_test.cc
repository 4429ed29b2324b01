// FramedKvSender against receivers that are dead or stop reading: every call
// must end within its bound with a clear status, never hang, and Abort must
// let go of the source blocks even when a frame is stuck half-written.
#include "absl/strings/str_cat.h"
#include "common/kv/framed_kv_sender.h"
#include "gtest/gtest.h"
#include "tests/testing/kv_test_util.h"

namespace pdserve {
namespace {

using ::pdserve::testing::DeadPort;
using ::pdserve::testing::MakeRandomCache;
using ::pdserve::testing::SilentListener;

constexpr int kLayers = 3;

KvTransferTarget TargetAt(uint16_t port, absl::Duration budget) {
  return KvTransferTarget{absl::StrCat("127.0.0.1:", port), 1, 1, absl::Now() + budget};
}

// 8 MiB per layer frame: more than loopback buffers a peer that never reads.
std::unique_ptr<KvCache> BigCache() {
  KvLayout layout;
  layout.n_layers = 2;
  layout.n_kv_heads = 8;
  layout.head_dim = 128;
  layout.block_size = 16;  // 64 KiB per layer-block
  auto cache = KvCache::Create(layout, 128);
  CHECK(cache.ok()) << cache.status();
  return std::move(cache).value();
}

std::vector<int32_t> Iota(int n) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(FramedKvSenderFaultTest, DeadEndpointIsUnavailableWithinDeadline) {
  std::unique_ptr<KvCache> src = MakeRandomCache(4, 1);
  std::unique_ptr<FramedKvSender> sender = FramedKvSender::Create().value();
  const KvTransferTarget target = TargetAt(DeadPort(), absl::Seconds(10));
  const absl::Time start = absl::Now();
  const absl::Status sent = sender->SendLayer(target, 0, {0}, *src, {1});
  EXPECT_TRUE(sent.ok() || absl::IsUnavailable(sent)) << sent;
  const absl::Status committed = sender->Commit(target, KvCommit{kLayers, 0, 0});
  EXPECT_EQ(committed.code(), absl::StatusCode::kUnavailable) << committed;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(FramedKvSenderFaultTest, SilentReceiverHitsTheDeadline) {
  std::unique_ptr<KvCache> src = MakeRandomCache(4, 1);
  std::unique_ptr<FramedKvSender> sender = FramedKvSender::Create().value();
  SilentListener listener;
  const KvTransferTarget target = TargetAt(listener.port(), absl::Milliseconds(300));
  ASSERT_TRUE(sender->SendLayer(target, 0, {0}, *src, {1}).ok());
  const absl::Status committed = sender->Commit(target, KvCommit{kLayers, 0, 0});
  EXPECT_EQ(committed.code(), absl::StatusCode::kDeadlineExceeded) << committed;
  EXPECT_LT(absl::Now() - target.deadline, absl::Seconds(2));
}

TEST(FramedKvSenderFaultTest, FullQueueAndAbortOfAStuckFrameDoNotBlock) {
  std::unique_ptr<KvCache> src = BigCache();
  FramedKvSenderOptions options;
  options.max_queued_frames = 3;
  std::unique_ptr<FramedKvSender> sender = FramedKvSender::Create(options).value();
  SilentListener listener;
  const KvTransferTarget target = TargetAt(listener.port(), absl::Seconds(30));
  const std::vector<int32_t> blocks = Iota(128);
  // Frame 1 gets stuck on the wire, frames 2 and 3 wait behind it, frame 4
  // has no slot: the engine gets an answer instead of blocking.
  ASSERT_TRUE(sender->SendLayer(target, 0, blocks, *src, blocks).ok());
  ASSERT_TRUE(sender->SendLayer(target, 1, blocks, *src, blocks).ok());
  ASSERT_TRUE(sender->SendLayer(target, 1, {0}, *src, {0}).ok());
  EXPECT_EQ(sender->SendLayer(target, 1, {1}, *src, {1}).code(),
            absl::StatusCode::kResourceExhausted);
  const absl::Time start = absl::Now();
  sender->Abort(target, "client cancelled");
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  // Abort returned, so nothing reads the blocks any more: free them.
  src.reset();
  // The sender still works for the next transfer (on a fresh connection;
  // the queue holds at most the ABORT frame, this layer and the commit).
  std::unique_ptr<KvCache> small = MakeRandomCache(4, 2);
  KvTransferTarget next = target;
  next.transfer_id = 2;
  next.deadline = absl::Now() + absl::Milliseconds(200);
  ASSERT_TRUE(sender->SendLayer(next, 0, {0}, *small, {1}).ok());
  EXPECT_EQ(sender->Commit(next, KvCommit{kLayers, 0, 0}).code(),
            absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace pdserve
