// Malformed and stalled peers against FramedKvReceiver. A raw client writes
// hand-made frames; every case must fail cleanly (the reservation the frame
// aims at, if any, ends with the right code; the connection is closed), leave
// every block outside the reservation untouched, and leave the receiver able
// to complete a good transfer afterwards.
#include <functional>

#include "absl/strings/str_cat.h"
#include "common/kv/framed_kv_receiver.h"
#include "common/kv/framed_kv_sender.h"
#include "gtest/gtest.h"
#include "tests/testing/kv_test_util.h"

namespace pdserve {
namespace {

using ::pdserve::testing::DoneProbe;
using ::pdserve::testing::ExpectGuardBlocksUntouched;
using ::pdserve::testing::LayerHeader;
using ::pdserve::testing::MakeCache;
using ::pdserve::testing::MakeRandomCache;
using ::pdserve::testing::RawKvClient;
using ::pdserve::testing::SameBlock;

constexpr uint8_t kGuard = 0x5a;
constexpr int kLayers = 3;
constexpr uint64_t kId = 7;
constexpr uint64_t kEpoch = 3;
const std::vector<int32_t> kReserved = {9, 2};  // logical 0, 1

std::string Garbage(size_t n) { return std::string(n, '\xee'); }

std::string LengthPrefix(uint32_t n) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

struct FaultCase {
  std::string name;
  // Writes the bad bytes; bpl = bytes per layer-block.
  std::function<void(RawKvClient&, int64_t bpl)> inject;
  // Code the reservation ends with; kOk: it must stay pending.
  absl::StatusCode reservation_code;
  bool expect_error_ack = false;
  bool client_closes = false;  // the client hangs up itself (truncation)
};

class FramedKvTransportFaultTest : public ::testing::TestWithParam<FaultCase> {
 protected:
  void SetUp() override {
    FramedKvReceiverOptions options;
    options.listen_address = "127.0.0.1:0";
    options.idle_timeout = absl::Milliseconds(300);
    auto receiver = FramedKvReceiver::Create(dst_.get(), options);
    ASSERT_TRUE(receiver.ok()) << receiver.status();
    receiver_ = std::move(receiver).value();
  }

  // Moves logical blocks 0..1 of every layer with the real sender.
  void SendGoodTransfer(uint64_t id, uint64_t epoch) {
    std::unique_ptr<FramedKvSender> sender = FramedKvSender::Create().value();
    const KvTransferTarget target{absl::StrCat("127.0.0.1:", receiver_->port()), id, epoch,
                                  absl::Now() + absl::Seconds(10)};
    for (int l = 0; l < kLayers; ++l) {
      ASSERT_TRUE(sender->SendLayer(target, l, {0, 1}, *src_, {4, 5}).ok());
    }
    ASSERT_TRUE(sender->Commit(target, KvCommit{kLayers, 0, 0}).ok());
  }

  std::unique_ptr<KvCache> src_ = MakeRandomCache(16, 99);
  std::unique_ptr<KvCache> dst_ = MakeCache(16, kGuard);
  std::unique_ptr<FramedKvReceiver> receiver_;
};

TEST_P(FramedKvTransportFaultTest, FailsCleanlyAndKeepsServing) {
  const FaultCase& fault = GetParam();
  const int64_t bpl = dst_->layout().bytes_per_layer_block();
  DoneProbe probe;
  ASSERT_TRUE(receiver_
                  ->Expect(kId, kEpoch, kReserved, kLayers, absl::Now() + absl::Seconds(20),
                           probe.Callback())
                  .ok());
  {
    RawKvClient client(receiver_->port());
    fault.inject(client, bpl);
    if (fault.expect_error_ack) {
      std::optional<v1::KvAck> ack = client.ReadAck();
      ASSERT_TRUE(ack.has_value()) << "no ack";
      EXPECT_FALSE(ack->ok());
      EXPECT_EQ(ack->status_code(), static_cast<int>(fault.reservation_code)) << ack->error();
    }
    if (!fault.client_closes) EXPECT_TRUE(client.WaitClosed()) << "connection left open";
  }
  if (fault.reservation_code == absl::StatusCode::kOk) {
    EXPECT_EQ(probe.calls(), 0);
    EXPECT_EQ(receiver_->num_pending(), 1u);
  } else {
    absl::StatusOr<KvCommit> done = probe.Wait();
    EXPECT_EQ(done.status().code(), fault.reservation_code) << done.status();
    EXPECT_EQ(receiver_->num_pending(), 0u);
  }
  ExpectGuardBlocksUntouched(*dst_, kReserved, kGuard);

  // The listener still serves: a good transfer completes (the same
  // reservation if it survived, else a fresh one).
  DoneProbe good;
  uint64_t id = kId;
  if (fault.reservation_code != absl::StatusCode::kOk) {
    id = kId + 1;
    ASSERT_TRUE(
        receiver_
            ->Expect(id, 1, kReserved, kLayers, absl::Now() + absl::Seconds(20), good.Callback())
            .ok());
  }
  SendGoodTransfer(id, id == kId ? kEpoch : 1);
  DoneProbe& winner = id == kId ? probe : good;
  ASSERT_TRUE(winner.Wait().ok()) << winner.Wait().status();
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_TRUE(SameBlock(*src_, 4, *dst_, kReserved[0], l));
    EXPECT_TRUE(SameBlock(*src_, 5, *dst_, kReserved[1], l));
  }
  ExpectGuardBlocksUntouched(*dst_, kReserved, kGuard);
}

using K = absl::StatusCode;

// A header of the reserved transfer with a tweak, followed by garbage bytes
// standing in for the payload a hostile peer would send anyway.
FaultCase BadHeader(std::string name, std::function<void(v1::KvFrameHeader&, int64_t)> tweak,
                    size_t garbage_blocks = 2) {
  return FaultCase{std::move(name),
                   [tweak, garbage_blocks](RawKvClient& c, int64_t bpl) {
                     v1::KvFrameHeader h = LayerHeader(kId, kEpoch, 0, {0, 1}, bpl);
                     tweak(h, bpl);
                     c.SendHeader(h);
                     c.Write(Garbage(garbage_blocks * bpl));
                   },
                   K::kInvalidArgument, /*expect_error_ack=*/true};
}

std::vector<FaultCase> Cases() {
  return {
      {"ZeroHeaderLength", [](RawKvClient& c, int64_t) { c.Write(LengthPrefix(0)); }, K::kOk},
      {"HugeHeaderLength",
       [](RawKvClient& c, int64_t) { c.Write(LengthPrefix(1 << 20) + Garbage(4096)); }, K::kOk},
      {"UnparseableHeader",
       [](RawKvClient& c, int64_t) { c.Write(LengthPrefix(12) + Garbage(12)); }, K::kOk},
      {"StallMidHeader", [](RawKvClient& c, int64_t) { c.Write(LengthPrefix(40).substr(0, 2)); },
       K::kOk},
      BadHeader("UnknownKind",
                [](v1::KvFrameHeader& h, int64_t) {
                  h.set_kind(static_cast<v1::KvFrameHeader::Kind>(7));
                }),
      BadHeader("OversizedPayload",
                [](v1::KvFrameHeader& h, int64_t) { h.set_payload_bytes(uint64_t{1} << 40); }),
      BadHeader("BlockIndexOutOfRange",
                [](v1::KvFrameHeader& h, int64_t) { h.set_block_indices(1, 2); }),
      BadHeader("WrongPayloadSize",
                [](v1::KvFrameHeader& h, int64_t bpl) { h.set_payload_bytes(2 * bpl - 1); }),
      BadHeader("DuplicateBlockInFrame",
                [](v1::KvFrameHeader& h, int64_t) { h.set_block_indices(1, 0); }),
      BadHeader("LayerOutOfRange", [](v1::KvFrameHeader& h, int64_t) { h.set_layer(kLayers); }),
      BadHeader("PayloadOnCommit",
                [](v1::KvFrameHeader& h, int64_t) { h.set_kind(v1::KvFrameHeader::COMMIT); }),
      {"DuplicateLayerAcrossFrames",
       [](RawKvClient& c, int64_t bpl) {
         c.SendHeader(LayerHeader(kId, kEpoch, 1, {0}, bpl));
         c.Write(Garbage(bpl));
         c.SendHeader(LayerHeader(kId, kEpoch, 1, {1, 0}, bpl));
         c.Write(Garbage(2 * bpl));
       },
       K::kInvalidArgument, /*expect_error_ack=*/true},
      {"TruncatedPayload",
       [](RawKvClient& c, int64_t bpl) {
         c.SendHeader(LayerHeader(kId, kEpoch, 0, {0, 1}, bpl));
         c.Write(Garbage(bpl + 7));
       },
       K::kDataLoss, /*expect_error_ack=*/false, /*client_closes=*/true},
      {"StallMidPayload",
       [](RawKvClient& c, int64_t bpl) {
         c.SendHeader(LayerHeader(kId, kEpoch, 2, {1, 0}, bpl));
         c.Write(Garbage(bpl / 2));
       },
       K::kDataLoss},
  };
}

INSTANTIATE_TEST_SUITE_P(Faults, FramedKvTransportFaultTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<FaultCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace pdserve
