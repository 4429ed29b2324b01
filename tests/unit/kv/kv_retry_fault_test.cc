// The receiver edges a prefill retry relies on (docs/protocol/kv-wire.md,
// "Prefill retry"): the decode worker re-arms a reservation under a higher epoch
// after the old epoch failed or was aborted, while the replaced prefill
// worker may still be sending. Late frames of a dead epoch, frames after a
// cancel and frames after a commit whose ack was lost must never be written
// into the blocks.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/kv/framed_kv_receiver.h"
#include "common/kv/framed_kv_sender.h"
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

constexpr uint8_t kGuard = 0x5a;
constexpr int kLayers = 3;
constexpr uint64_t kId = 11;
const std::vector<int32_t> kDst = {3, 4};  // logical 0, 1
const std::vector<int32_t> kSrc = {7, 2};

v1::KvFrameHeader Control(v1::KvFrameHeader::Kind kind, uint64_t epoch) {
  v1::KvFrameHeader h;
  h.set_transfer_id(kId);
  h.set_epoch(epoch);
  h.set_kind(kind);
  return h;
}

class FramedKvRetryFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FramedKvReceiverOptions options;
    options.listen_address = "127.0.0.1:0";
    options.idle_timeout = absl::Milliseconds(500);
    auto receiver = FramedKvReceiver::Create(dst_.get(), options);
    ASSERT_TRUE(receiver.ok()) << receiver.status();
    receiver_ = std::move(receiver).value();
  }

  int64_t bpl() const { return dst_->layout().bytes_per_layer_block(); }

  absl::Status Expect(uint64_t epoch, DoneProbe& probe) {
    return receiver_->Expect(kId, epoch, kDst, kLayers, absl::Now() + absl::Seconds(10),
                             probe.Callback());
  }

  // The replacement prefill worker: every layer with the real sender.
  absl::Status SendGoodTransfer(uint64_t epoch) {
    std::unique_ptr<FramedKvSender> sender = FramedKvSender::Create().value();
    const KvTransferTarget target{absl::StrCat("127.0.0.1:", receiver_->port()), kId, epoch,
                                  absl::Now() + absl::Seconds(10)};
    for (int l = 0; l < kLayers; ++l) {
      absl::Status s = sender->SendLayer(target, l, {0, 1}, *src_, kSrc);
      if (!s.ok()) return s;
    }
    return sender->Commit(target, KvCommit{kLayers, 0, 0});
  }

  void ExpectCopied() {
    for (int l = 0; l < kLayers; ++l) {
      for (size_t i = 0; i < kSrc.size(); ++i) {
        EXPECT_TRUE(SameBlock(*src_, kSrc[i], *dst_, kDst[i], l)) << "layer " << l << " " << i;
      }
    }
  }

  // Reads acks until one for `epoch` arrives (acks for other epochs may
  // come first).
  std::optional<v1::KvAck> AckFor(RawKvClient& client, uint64_t epoch) {
    for (int i = 0; i < 4; ++i) {
      std::optional<v1::KvAck> ack = client.ReadAck();
      if (!ack.has_value() || ack->epoch() == epoch) return ack;
    }
    return std::nullopt;
  }

  std::unique_ptr<KvCache> src_ = MakeRandomCache(16, 77);
  std::unique_ptr<KvCache> dst_ = MakeCache(16, kGuard);
  std::unique_ptr<FramedKvReceiver> receiver_;
};

// P1 dies mid-payload; D keeps the blocks and re-arms them under epoch 2.
// P1's frames that were still in flight (a new connection, a whole layer
// and a COMMIT) are dropped; P2 then completes epoch 2.
TEST_F(FramedKvRetryFaultTest, ReArmAfterCutEpochDropsItsLateFrames) {
  DoneProbe first;
  ASSERT_TRUE(Expect(1, first).ok());
  {
    RawKvClient p1(receiver_->port());
    ASSERT_TRUE(p1.SendHeader(LayerHeader(kId, 1, 0, {0, 1}, bpl())));
    ASSERT_TRUE(p1.Write(std::string(bpl() / 2, '\xee')));
  }  // P1 dies
  EXPECT_EQ(first.Wait().status().code(), absl::StatusCode::kDataLoss);

  DoneProbe second;
  ASSERT_TRUE(Expect(2, second).ok());
  RawKvClient late(receiver_->port());
  ASSERT_TRUE(late.SendHeader(LayerHeader(kId, 1, 1, {0, 1}, bpl())));
  ASSERT_TRUE(late.Write(std::string(2 * bpl(), '\xee')));
  v1::KvFrameHeader commit = Control(v1::KvFrameHeader::COMMIT, 1);
  commit.set_num_layers(kLayers);
  commit.set_total_bytes(kLayers * 2 * bpl());
  ASSERT_TRUE(late.SendHeader(commit));
  std::optional<v1::KvAck> ack = AckFor(late, 1);
  ASSERT_TRUE(ack.has_value());
  EXPECT_FALSE(ack->ok());
  EXPECT_EQ(ack->status_code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(second.calls(), 0) << "a stale commit must not end the new epoch";

  ASSERT_TRUE(SendGoodTransfer(2).ok());
  ASSERT_TRUE(second.Wait().ok());
  ExpectCopied();
  ExpectGuardBlocksUntouched(*dst_, kDst, kGuard);
}

// The router cancelled P1 (it hung): P1's ABORT ends epoch 1, D re-arms
// epoch 2, then the request is cancelled. Frames of epoch 1 after the
// re-arm and of epoch 2 after the cancel must not write a byte.
TEST_F(FramedKvRetryFaultTest, LateFramesAfterAbortAndCancelAreNeverWritten) {
  DoneProbe first;
  ASSERT_TRUE(Expect(1, first).ok());
  RawKvClient p1(receiver_->port());
  ASSERT_TRUE(p1.SendHeader(Control(v1::KvFrameHeader::ABORT, 1)));
  EXPECT_EQ(first.Wait().status().code(), absl::StatusCode::kAborted);

  DoneProbe second;
  ASSERT_TRUE(Expect(2, second).ok());
  ASSERT_TRUE(p1.SendHeader(LayerHeader(kId, 1, 0, {0, 1}, bpl())));
  ASSERT_TRUE(p1.Write(std::string(2 * bpl(), '\xee')));
  receiver_->Cancel(kId);
  EXPECT_EQ(second.Wait().status().code(), absl::StatusCode::kCancelled);

  RawKvClient p2(receiver_->port());
  ASSERT_TRUE(p2.SendHeader(LayerHeader(kId, 2, 0, {0, 1}, bpl())));
  ASSERT_TRUE(p2.Write(std::string(2 * bpl(), '\xee')));
  std::optional<v1::KvAck> ack = AckFor(p2, 2);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->status_code(), static_cast<int>(absl::StatusCode::kNotFound));
  ExpectGuardBlocksUntouched(*dst_, {}, kGuard);  // the reserved ones too
  EXPECT_EQ(receiver_->num_pending(), 0u);
}

// D committed but its ack never reached P (P's Commit fails, the router may
// retry). Whatever P resends for the committed epoch is refused and never
// overwrites the blocks the engine now owns.
TEST_F(FramedKvRetryFaultTest, FramesAfterACommitWhoseAckWasLostAreRefused) {
  DoneProbe probe;
  ASSERT_TRUE(Expect(1, probe).ok());
  ASSERT_TRUE(SendGoodTransfer(1).ok());
  ASSERT_TRUE(probe.Wait().ok());

  RawKvClient resend(receiver_->port());
  ASSERT_TRUE(resend.SendHeader(LayerHeader(kId, 1, 0, {0, 1}, bpl())));
  ASSERT_TRUE(resend.Write(std::string(2 * bpl(), '\xee')));
  std::optional<v1::KvAck> ack = AckFor(resend, 1);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->status_code(), static_cast<int>(absl::StatusCode::kNotFound));
  ExpectCopied();
  ExpectGuardBlocksUntouched(*dst_, kDst, kGuard);
  EXPECT_EQ(probe.calls(), 1);
}

}  // namespace
}  // namespace pdserve
