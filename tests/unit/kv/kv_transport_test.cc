// FramedKvSender -> FramedKvReceiver on loopback, between two real KvCaches.
// Malformed frames from a raw client are in kv_transport_fault_test.cc,
// dead and stalled receivers in framed_kv_sender_fault_test.cc.
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/cpu/kv_int8.h"
#include "common/kv/framed_kv_receiver.h"
#include "common/kv/framed_kv_sender.h"
#include "common/request/token_logprobs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/kv_test_util.h"

namespace pdserve {
namespace {

using ::pdserve::testing::BlockIs;
using ::pdserve::testing::DoneProbe;
using ::pdserve::testing::ExpectGuardBlocksUntouched;
using ::pdserve::testing::LayerHeader;
using ::pdserve::testing::MakeCache;
using ::pdserve::testing::MakeRandomCache;
using ::pdserve::testing::RawKvClient;
using ::pdserve::testing::SameBlock;
using ::testing::HasSubstr;

constexpr uint8_t kGuard = 0x5a;
constexpr int kLayers = 3;

class FramedKvTransportTest : public ::testing::Test {
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

  std::string endpoint() const { return absl::StrCat("127.0.0.1:", receiver_->port()); }
  int64_t block_bytes() const { return src_->layout().bytes_per_layer_block(); }

  KvTransferTarget Target(uint64_t id, uint64_t epoch = 1) {
    return KvTransferTarget{endpoint(), id, epoch, absl::Now() + absl::Seconds(10)};
  }

  absl::Status ExpectTransfer(uint64_t id, uint64_t epoch, std::vector<int32_t> dst,
                              DoneProbe& probe) {
    return receiver_->Expect(id, epoch, std::move(dst), kLayers, absl::Now() + absl::Seconds(10),
                             probe.Callback());
  }

  // Sends every layer of logical blocks 0..src.size()-1 in one frame each.
  absl::Status SendLayers(KvSender& sender, const KvTransferTarget& target,
                          const std::vector<int32_t>& src, int layers = kLayers) {
    std::vector<int32_t> logical(src.size());
    for (size_t i = 0; i < src.size(); ++i) logical[i] = static_cast<int32_t>(i);
    for (int l = 0; l < layers; ++l) {
      absl::Status st = sender.SendLayer(target, l, logical, *src_, src);
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }

  void ExpectCopied(const std::vector<int32_t>& src, const std::vector<int32_t>& dst) {
    for (int l = 0; l < kLayers; ++l) {
      for (size_t i = 0; i < src.size(); ++i) {
        EXPECT_TRUE(SameBlock(*src_, src[i], *dst_, dst[i], l))
            << "layer " << l << " logical block " << i;
      }
    }
  }

  std::unique_ptr<KvCache> src_ = MakeRandomCache(16, 1234);
  std::unique_ptr<KvCache> dst_ = MakeCache(16, kGuard);
  std::unique_ptr<FramedKvReceiver> receiver_;
  std::unique_ptr<FramedKvSender> sender_;
};

TEST_F(FramedKvTransportTest, RoundTripWithNonIdentityBlockMapping) {
  const std::vector<int32_t> src = {7, 2, 9, 0, 11};
  const std::vector<int32_t> dst = {3, 14, 1, 8, 5};
  DoneProbe probe;
  ASSERT_TRUE(ExpectTransfer(1, 1, dst, probe).ok());
  const KvTransferTarget target = Target(1);
  // Layer 1 arrives in two frames, blocks out of order.
  ASSERT_TRUE(sender_->SendLayer(target, 0, {0, 1, 2, 3, 4}, *src_, src).ok());
  ASSERT_TRUE(sender_->SendLayer(target, 1, {4, 2}, *src_, {11, 9}).ok());
  ASSERT_TRUE(sender_->SendLayer(target, 1, {0, 3, 1}, *src_, {7, 0, 2}).ok());
  ASSERT_TRUE(sender_->SendLayer(target, 2, {0, 1, 2, 3, 4}, *src_, src).ok());
  KvCommit commit{kLayers, 0, 42};
  commit.first_token_logprobs = TokenLogprobs{42, -0.125f, {{42, -0.125f}, {7, -2.5f}}};
  ASSERT_TRUE(sender_->Commit(target, commit).ok());

  absl::StatusOr<KvCommit> done = probe.Wait();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->num_layers, kLayers);
  EXPECT_EQ(done->first_token, 42);
  EXPECT_EQ(done->first_token_logprobs, commit.first_token_logprobs);
  EXPECT_EQ(done->total_bytes, static_cast<uint64_t>(kLayers * 5 * block_bytes()));
  EXPECT_EQ(receiver_->num_pending(), 0u);
  ExpectCopied(src, dst);
  ExpectGuardBlocksUntouched(*dst_, dst, kGuard);
}

TEST_F(FramedKvTransportTest, ConcurrentTransfersInterleave) {
  const std::vector<int32_t> src_a = {1, 2, 3}, dst_a = {0, 1, 2};
  const std::vector<int32_t> src_b = {4, 5}, dst_b = {10, 11};
  const std::vector<int32_t> src_c = {6, 7, 8, 9}, dst_c = {12, 13, 14, 15};
  DoneProbe a, b, c;
  ASSERT_TRUE(ExpectTransfer(1, 1, dst_a, a).ok());
  ASSERT_TRUE(ExpectTransfer(2, 1, dst_b, b).ok());
  ASSERT_TRUE(ExpectTransfer(3, 1, dst_c, c).ok());
  // C comes from another prefill worker (its own connection) at the same time.
  std::thread other([&] {
    std::unique_ptr<FramedKvSender> sender = FramedKvSender::Create().value();
    EXPECT_TRUE(SendLayers(*sender, Target(3), src_c).ok());
    EXPECT_TRUE(sender->Commit(Target(3), KvCommit{kLayers, 0, 3}).ok());
  });
  for (int l = 0; l < kLayers; ++l) {
    ASSERT_TRUE(sender_->SendLayer(Target(1), l, {0, 1, 2}, *src_, src_a).ok());
    ASSERT_TRUE(sender_->SendLayer(Target(2), l, {0, 1}, *src_, src_b).ok());
  }
  EXPECT_TRUE(sender_->Commit(Target(2), KvCommit{kLayers, 0, 2}).ok());
  EXPECT_TRUE(sender_->Commit(Target(1), KvCommit{kLayers, 0, 1}).ok());
  other.join();
  for (auto [probe, token] : {std::pair{&a, 1}, {&b, 2}, {&c, 3}}) {
    absl::StatusOr<KvCommit> done = probe->Wait();
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->first_token, token);
    EXPECT_FALSE(done->first_token_logprobs.has_value());  // none were sent
  }
  ExpectCopied(src_a, dst_a);
  ExpectCopied(src_b, dst_b);
  ExpectCopied(src_c, dst_c);
}

TEST_F(FramedKvTransportTest, BlocksTheReceiverHoldsAreNotSent) {
  DoneProbe probe;
  ASSERT_TRUE(ExpectTransfer(1, 1, {kKvBlockNotSent, 6, 7}, probe).ok());
  for (int l = 0; l < kLayers; ++l) {
    ASSERT_TRUE(sender_->SendLayer(Target(1), l, {1, 2}, *src_, {4, 5}).ok());
  }
  ASSERT_TRUE(sender_->Commit(Target(1), KvCommit{kLayers, 0, 0}).ok());
  ASSERT_TRUE(probe.Wait().ok());
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_TRUE(SameBlock(*src_, 4, *dst_, 6, l));
    EXPECT_TRUE(SameBlock(*src_, 5, *dst_, 7, l));
  }
  ExpectGuardBlocksUntouched(*dst_, {6, 7}, kGuard);

  // Sending a block the receiver holds is a protocol error.
  DoneProbe held;
  ASSERT_TRUE(ExpectTransfer(2, 1, {kKvBlockNotSent, 8}, held).ok());
  ASSERT_TRUE(sender_->SendLayer(Target(2), 0, {0}, *src_, {4}).ok());
  EXPECT_FALSE(sender_->Commit(Target(2), KvCommit{kLayers, 0, 0}).ok());
  EXPECT_EQ(held.Wait().status().code(), absl::StatusCode::kInvalidArgument);
  ExpectGuardBlocksUntouched(*dst_, {6, 7, 8}, kGuard);
}

TEST_F(FramedKvTransportTest, StaleEpochFrameIsDiscardedAfterReExpect) {
  const std::vector<int32_t> dst = {3, 4}, src = {7, 2};
  DoneProbe old_epoch, new_epoch;
  ASSERT_TRUE(ExpectTransfer(5, 1, dst, old_epoch).ok());
  ASSERT_TRUE(ExpectTransfer(5, 2, dst, new_epoch).ok());
  EXPECT_EQ(old_epoch.Wait().status().code(), absl::StatusCode::kAborted);
  DoneProbe unused;
  EXPECT_EQ(ExpectTransfer(5, 2, dst, unused).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ExpectTransfer(5, 1, dst, unused).code(), absl::StatusCode::kFailedPrecondition);

  // The old prefill worker is still sending epoch 1: dropped without a word,
  // and the same connection then carries the whole of epoch 2.
  RawKvClient client(receiver_->port());
  ASSERT_TRUE(client.SendHeader(LayerHeader(5, 1, 0, {0, 1}, block_bytes())));
  ASSERT_TRUE(client.Write(std::string(2 * block_bytes(), '\xee')));
  for (uint32_t l = 0; l < kLayers; ++l) {
    ASSERT_TRUE(client.SendHeader(LayerHeader(5, 2, l, {0, 1}, block_bytes())));
    for (int32_t s : src) ASSERT_TRUE(client.Write(src_->LayerBlock(l, s), block_bytes()));
  }
  v1::KvFrameHeader commit;
  commit.set_transfer_id(5);
  commit.set_epoch(2);
  commit.set_kind(v1::KvFrameHeader::COMMIT);
  commit.set_num_layers(kLayers);
  commit.set_total_bytes(kLayers * 2 * block_bytes());
  ASSERT_TRUE(client.SendHeader(commit));
  std::optional<v1::KvAck> ack = client.ReadAck();
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->ok()) << ack->error();
  EXPECT_EQ(ack->epoch(), 2u);
  ASSERT_TRUE(new_epoch.Wait().ok());
  ExpectCopied(src, dst);
  ExpectGuardBlocksUntouched(*dst_, dst, kGuard);
  EXPECT_EQ(unused.calls(), 0);
}

TEST_F(FramedKvTransportTest, DeadlineExpiresWithoutData) {
  DoneProbe probe;
  ASSERT_TRUE(
      receiver_
          ->Expect(1, 1, {0, 1}, kLayers, absl::Now() + absl::Milliseconds(100), probe.Callback())
          .ok());
  EXPECT_EQ(probe.Wait().status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(receiver_->num_pending(), 0u);
  EXPECT_EQ(probe.calls(), 1);
}

// The wait runs from the last frame: a transfer that keeps streaming (a
// long prompt, chunk by chunk) outlives its first window; one that stops
// does not.
TEST_F(FramedKvTransportTest, DeadlineCountsFromTheLastFrame) {
  const absl::Duration window = absl::Seconds(1);
  const absl::Duration gap = absl::Milliseconds(450);  // < 7/8 of the window
  const std::vector<int32_t> src = {3, 4}, dst = {5, 6};
  DoneProbe streaming, stopped;
  ASSERT_TRUE(
      receiver_->Expect(1, 1, dst, kLayers, absl::Now() + window, streaming.Callback()).ok());
  ASSERT_TRUE(
      receiver_->Expect(2, 1, {7, 8}, kLayers, absl::Now() + window, stopped.Callback()).ok());
  const absl::Time start = absl::Now();
  ASSERT_TRUE(sender_->SendLayer(Target(2), 0, {0, 1}, *src_, src).ok());
  for (int l = 0; l < kLayers; ++l) {
    ASSERT_TRUE(sender_->SendLayer(Target(1), l, {0, 1}, *src_, src).ok());
    absl::SleepFor(gap);
  }
  ASSERT_TRUE(sender_->Commit(Target(1), KvCommit{kLayers, 0, 7}).ok());
  absl::StatusOr<KvCommit> done = streaming.Wait();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_GT(absl::Now() - start, window);
  ExpectCopied(src, dst);
  const absl::StatusOr<KvCommit> timed_out = stopped.Wait();
  EXPECT_EQ(timed_out.status().code(), absl::StatusCode::kDeadlineExceeded);
  // Not kept alive by the other's frames (timed where it ended: the
  // streaming loop above may itself overrun under load).
  EXPECT_LT(stopped.called_at() - start, window + 2 * gap);
  EXPECT_THAT(timed_out.status().message(), HasSubstr("no KV frame for "));
  EXPECT_EQ(receiver_->num_pending(), 0u);
}

// PROGRESS frames (a sender recomputing a prefix the receiver holds, with
// nothing to send) keep the wait alive like layers do; the layers that
// follow still land, and a PROGRESS of an unknown transfer is ignored.
TEST_F(FramedKvTransportTest, ProgressFramesKeepTheWaitAlive) {
  const absl::Duration window = absl::Seconds(1);
  const std::vector<int32_t> src = {3, 4}, dst = {5, 6};
  DoneProbe probe;
  ASSERT_TRUE(receiver_->Expect(1, 1, dst, kLayers, absl::Now() + window, probe.Callback()).ok());
  const absl::Time start = absl::Now();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(sender_->SendProgress(Target(1)).ok());
    ASSERT_TRUE(sender_->SendProgress(Target(99)).ok());
    absl::SleepFor(absl::Milliseconds(450));
  }
  ASSERT_TRUE(SendLayers(*sender_, Target(1), src).ok());
  ASSERT_TRUE(sender_->Commit(Target(1), KvCommit{kLayers, 0, 7}).ok());
  absl::StatusOr<KvCommit> done = probe.Wait();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_GT(absl::Now() - start, window);
  ExpectCopied(src, dst);
  sender_->Abort(Target(99), "test done");
}

TEST_F(FramedKvTransportTest, CancelFiresExactlyOnceAndLateFramesAreRefused) {
  DoneProbe probe;
  ASSERT_TRUE(ExpectTransfer(1, 1, {0, 1}, probe).ok());
  receiver_->Cancel(1);
  EXPECT_EQ(probe.calls(), 1);  // before Cancel returned
  receiver_->Cancel(1);
  receiver_->Cancel(99);
  EXPECT_EQ(probe.Wait().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(receiver_->num_pending(), 0u);

  // The receiver's NOT_FOUND for the first late frame may reach the sender
  // before its last layers are queued: then a later SendLayer reports it,
  // else the commit does. Either way the transfer is refused.
  absl::Status late = SendLayers(*sender_, Target(1), {2, 3});
  if (late.ok()) late = sender_->Commit(Target(1), KvCommit{kLayers, 0, 0});
  EXPECT_EQ(late.code(), absl::StatusCode::kNotFound) << late;
  sender_->Abort(Target(1), "test");  // no-op after a commit
  EXPECT_EQ(probe.calls(), 1);
  ExpectGuardBlocksUntouched(*dst_, {}, kGuard);
}

TEST_F(FramedKvTransportTest, SenderAbortReachesReceiver) {
  DoneProbe probe;
  ASSERT_TRUE(ExpectTransfer(1, 1, {0, 1}, probe).ok());
  ASSERT_TRUE(sender_->SendLayer(Target(1), 0, {0, 1}, *src_, {2, 3}).ok());
  sender_->Abort(Target(1), "prefill ran out of memory");
  absl::StatusOr<KvCommit> done = probe.Wait();
  EXPECT_EQ(done.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(done.status().message(), HasSubstr("prefill ran out of memory"));
  sender_->Abort(Target(1), "again");  // idempotent
  EXPECT_EQ(probe.calls(), 1);
}

TEST_F(FramedKvTransportTest, CommitWithMissingLayerIsDataLoss) {
  DoneProbe probe;
  ASSERT_TRUE(ExpectTransfer(1, 1, {0, 1}, probe).ok());
  ASSERT_TRUE(SendLayers(*sender_, Target(1), {2, 3}, /*layers=*/2).ok());
  EXPECT_EQ(sender_->Commit(Target(1), KvCommit{kLayers, 0, 0}).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(probe.Wait().status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(FramedKvTransportTest, SenderReconnectsAfterReceiverDropsConnection) {
  DoneProbe bad, good;
  ASSERT_TRUE(ExpectTransfer(1, 1, {0, 1}, bad).ok());
  // Logical block 5 is outside D's reservation: D fails the transfer and
  // closes the connection.
  ASSERT_TRUE(sender_->SendLayer(Target(1), 0, {0, 5}, *src_, {2, 3}).ok());
  EXPECT_FALSE(sender_->Commit(Target(1), KvCommit{kLayers, 0, 0}).ok());
  EXPECT_EQ(bad.Wait().status().code(), absl::StatusCode::kInvalidArgument);
  ExpectGuardBlocksUntouched(*dst_, {0, 1}, kGuard);

  ASSERT_TRUE(ExpectTransfer(2, 1, {4, 6}, good).ok());
  ASSERT_TRUE(SendLayers(*sender_, Target(2), {8, 9}).ok());
  ASSERT_TRUE(sender_->Commit(Target(2), KvCommit{kLayers, 0, 0}).ok());
  ASSERT_TRUE(good.Wait().ok());
  ExpectCopied({8, 9}, {4, 6});
}

TEST_F(FramedKvTransportTest, SendLayerValidatesArguments) {
  const KvTransferTarget t = Target(1);
  EXPECT_EQ(sender_->SendLayer(t, -1, {0}, *src_, {0}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sender_->SendLayer(t, kLayers, {0}, *src_, {0}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sender_->SendLayer(t, 0, {0, 1}, *src_, {0}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sender_->SendLayer(t, 0, {}, *src_, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sender_->SendLayer(t, 0, {0}, *src_, {16}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sender_->SendLayer(t, 0, {-1}, *src_, {0}).code(), absl::StatusCode::kInvalidArgument);
  KvTransferTarget bad = t;
  bad.endpoint = "no-port";
  EXPECT_EQ(sender_->SendLayer(bad, 0, {0}, *src_, {0}).code(), absl::StatusCode::kInvalidArgument);
  KvTransferTarget other_epoch = t;
  ASSERT_TRUE(sender_->SendLayer(t, 0, {0}, *src_, {0}).ok());
  other_epoch.epoch = 2;
  EXPECT_EQ(sender_->SendLayer(other_epoch, 0, {0}, *src_, {0}).code(),
            absl::StatusCode::kFailedPrecondition);
  sender_->Abort(t, "test over");

  FramedKvSenderOptions no_timeout;
  no_timeout.idle_timeout = absl::ZeroDuration();
  EXPECT_EQ(FramedKvSender::Create(no_timeout).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FramedKvReceiverCreateTest, RejectsBadOptions) {
  std::unique_ptr<KvCache> cache = MakeCache(4, 0);
  FramedKvReceiverOptions options;
  options.listen_address = "127.0.0.1:http";
  EXPECT_EQ(FramedKvReceiver::Create(cache.get(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.listen_address = "300.1.1.1:0";
  EXPECT_EQ(FramedKvReceiver::Create(cache.get(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.listen_address = "127.0.0.1:0";
  options.idle_timeout = absl::ZeroDuration();
  EXPECT_EQ(FramedKvReceiver::Create(cache.get(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(FramedKvTransportTest, ExpectValidatesArguments) {
  DoneProbe probe;
  const absl::Time later = absl::Now() + absl::Seconds(10);
  EXPECT_EQ(receiver_->Expect(1, 1, {0, 16}, kLayers, later, probe.Callback()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(receiver_->Expect(1, 1, {2, 2}, kLayers, later, probe.Callback()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(receiver_->Expect(1, 1, {0}, 0, later, probe.Callback()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(receiver_->Expect(1, 1, {0}, kLayers + 1, later, probe.Callback()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(receiver_->Expect(1, 1, {0}, kLayers, absl::Now() - absl::Seconds(1), probe.Callback())
                .code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(receiver_->num_pending(), 0u);
  EXPECT_EQ(probe.calls(), 0);
}

TEST_F(FramedKvTransportTest, ReceiverShutdownCancelsPendingTransfers) {
  DoneProbe probe;
  ASSERT_TRUE(ExpectTransfer(1, 1, {0}, probe).ok());
  receiver_.reset();
  EXPECT_EQ(probe.calls(), 1);
  EXPECT_EQ(probe.Wait().status().code(), absl::StatusCode::kCancelled);
}

// An int8 cache moves as stored: quantised rows and their in-block scales,
// in fewer bytes per block than f16, and decodes to the same values.
TEST(FramedKvTransportInt8Test, MovesQuantisedBlocksWithTheirScales) {
  KvLayout layout = ::pdserve::testing::SmallKvLayout();
  layout.head_dim = 8;
  layout.dtype = kKvDtypeInt8;
  KvLayout f16 = layout;
  f16.dtype = kKvDtypeF16;
  // Per row: 2 heads x 8 int8 + 2 f32 scales = 24 bytes, vs 32 in f16.
  ASSERT_EQ(layout.bytes_per_layer_block(), 2 * 4 * 24);
  ASSERT_LT(layout.bytes_per_layer_block(), f16.bytes_per_layer_block());
  std::unique_ptr<KvCache> src = KvCache::Create(layout, 6).value();
  std::unique_ptr<KvCache> dst = KvCache::Create(layout, 6).value();
  std::mt19937 rng(77);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> row(layout.head_dim);
  for (int l = 0; l < kLayers; ++l) {
    for (int32_t b = 0; b < 6; ++b) {
      for (int r = 0; r < layout.block_size; ++r) {
        for (int h = 0; h < layout.n_kv_heads; ++h) {
          const int64_t off = r * layout.kv_dim() + h * layout.head_dim;
          for (float& x : row) x = normal(rng);
          src->KScales(l, b)[r * layout.n_kv_heads + h] =
              QuantizeKvInt8(row.data(), layout.head_dim, src->K8(l, b) + off);
          for (float& x : row) x = normal(rng);
          src->VScales(l, b)[r * layout.n_kv_heads + h] =
              QuantizeKvInt8(row.data(), layout.head_dim, src->V8(l, b) + off);
        }
      }
    }
  }
  auto receiver = FramedKvReceiver::Create(dst.get(), {.listen_address = "127.0.0.1:0"});
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  auto sender = FramedKvSender::Create();
  ASSERT_TRUE(sender.ok()) << sender.status();
  const std::vector<int32_t> src_blocks = {4, 1, 5}, dst_blocks = {0, 3, 2};
  DoneProbe probe;
  ASSERT_TRUE((*receiver)
                  ->Expect(1, 1, dst_blocks, kLayers, absl::Now() + absl::Seconds(10),
                           probe.Callback())
                  .ok());
  const KvTransferTarget target{absl::StrCat("127.0.0.1:", (*receiver)->port()), 1, 1,
                                absl::Now() + absl::Seconds(10)};
  for (int l = 0; l < kLayers; ++l) {
    ASSERT_TRUE((*sender)->SendLayer(target, l, {0, 1, 2}, *src, src_blocks).ok());
  }
  ASSERT_TRUE((*sender)->Commit(target, KvCommit{kLayers, 0, 7}).ok());
  absl::StatusOr<KvCommit> done = probe.Wait();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->total_bytes,
            static_cast<uint64_t>(kLayers * 3 * layout.bytes_per_layer_block()));
  for (int l = 0; l < kLayers; ++l) {
    for (size_t i = 0; i < src_blocks.size(); ++i) {
      EXPECT_TRUE(SameBlock(*src, src_blocks[i], *dst, dst_blocks[i], l)) << l << " " << i;
      const int32_t s = src_blocks[i], d = dst_blocks[i];
      for (int r = 0; r < layout.block_size * layout.n_kv_heads; ++r) {
        ASSERT_EQ(dst->VScales(l, d)[r], src->VScales(l, s)[r]);
        ASSERT_GT(dst->KScales(l, d)[r], 0.0f);
      }
    }
  }
}

}  // namespace
}  // namespace pdserve
