// The KV receiver's epoch fence on its own: every rule the receiver relies
// on to keep an old epoch's bytes out of a new epoch's blocks and to hand
// blocks back only once nothing writes into them. The connections are never
// started: the fence only compares them.
#include "common/kv/kv_epoch_fence.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/kv/kv_receive_connection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

using ConnPtr = KvEpochFence::ConnPtr;
using Ticket = KvEpochFence::Ticket;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;
using ::testing::UnorderedElementsAre;

class KvEpochFenceTest : public ::testing::Test {
 protected:
  ConnPtr NewConn() {
    return std::make_shared<KvReceiveConnection>(
        KvStream(boost::asio::ip::tcp::socket(io_), /*tls=*/nullptr), /*sink=*/nullptr,
        absl::Seconds(1));
  }

  static v1::KvFrameHeader Layer(uint64_t transfer_id, uint64_t epoch, int layer) {
    v1::KvFrameHeader h;
    h.set_kind(v1::KvFrameHeader::LAYER_BLOCKS);
    h.set_transfer_id(transfer_id);
    h.set_epoch(epoch);
    h.set_layer(layer);
    return h;
  }

  // Opens (transfer_id, epoch), lets `writer` (if any) start a channel
  // receive into it, and ends it; the ticket it waits as, if any.
  std::optional<Ticket> EndEpoch(uint64_t transfer_id, uint64_t epoch, const ConnPtr& writer) {
    fence_.Open(transfer_id, epoch);
    if (writer != nullptr) fence_.BeginChannelWrite(transfer_id, writer);
    KvEpochFence::Ended ended = fence_.End(transfer_id);
    EXPECT_THAT(ended.released, IsEmpty());
    return ended.waits_as;
  }

  // Every ended epoch of `transfer_id` that may complete now, in order.
  std::vector<Ticket> DrainSettled(uint64_t transfer_id) {
    std::vector<Ticket> done;
    while (std::optional<Ticket> t = fence_.NextSettled(transfer_id)) done.push_back(*t);
    return done;
  }

  // (connection, layer) of each frame, to compare.
  static std::vector<std::pair<KvReceiveConnection*, int>> Frames(
      const std::vector<KvEpochFence::HeldFrame>& frames) {
    std::vector<std::pair<KvReceiveConnection*, int>> out;
    for (const auto& f : frames) out.emplace_back(f.conn.get(), f.header.layer());
    return out;
  }

  boost::asio::io_context io_;
  KvEpochFence fence_;
};

TEST_F(KvEpochFenceTest, AnEpochNothingWritesIntoCompletesAtOnce) {
  EXPECT_EQ(EndEpoch(1, 1, nullptr), std::nullopt);
  EXPECT_FALSE(fence_.Fenced(1));
  EXPECT_EQ(fence_.NextSettled(1), std::nullopt);
  EXPECT_THAT(fence_.TakeAllEnded(), IsEmpty());
}

TEST_F(KvEpochFenceTest, AFinishedReceiveNoLongerHoldsTheEpoch) {
  const ConnPtr a = NewConn();
  fence_.Open(1, 1);
  fence_.BeginChannelWrite(1, a);
  EXPECT_TRUE(fence_.EndChannelWrite(1, a));
  EXPECT_FALSE(fence_.EndChannelWrite(1, a));  // once
  EXPECT_EQ(fence_.End(1).waits_as, std::nullopt);
}

TEST_F(KvEpochFenceTest, AnEpochEndedMidReceiveWaitsUntilTheChannelSettles) {
  const ConnPtr a = NewConn();
  const std::optional<Ticket> t = EndEpoch(1, 1, a);
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(fence_.FeedsEnded(a));
  // The receive's completion is no longer the current epoch's.
  EXPECT_FALSE(fence_.EndChannelWrite(1, a));
  EXPECT_EQ(fence_.NextSettled(1), std::nullopt);
  EXPECT_THAT(fence_.SettleChannel(a), Optional(1u));
  EXPECT_FALSE(fence_.FeedsEnded(a));
  EXPECT_THAT(DrainSettled(1), ElementsAre(*t));
  EXPECT_FALSE(fence_.Fenced(1));
}

TEST_F(KvEpochFenceTest, SettlingAConnectionThatFedNoEndedEpochChangesNothing) {
  const ConnPtr a = NewConn();
  const ConnPtr b = NewConn();
  ASSERT_TRUE(EndEpoch(1, 1, a).has_value());
  EXPECT_EQ(fence_.SettleChannel(b), std::nullopt);
  EXPECT_EQ(fence_.NextSettled(1), std::nullopt);
  EXPECT_TRUE(fence_.Fenced(1));
}

TEST_F(KvEpochFenceTest, WhetherANewEpochsLayerFramesAreHeld) {
  struct Case {
    const char* name;
    // An ended epoch 1 of this transfer (0: none), whose channel was
    // receiving when it ended, and whether that receive settled since.
    uint64_t old_transfer;
    bool old_wrote;
    bool old_settled;
    bool held;
  };
  const Case cases[] = {
      {"no older epoch", 0, false, false, false},
      {"older epoch ended with nothing writing", 7, false, false, false},
      {"older epoch still receiving", 7, true, false, true},
      {"older epoch's receive settled", 7, true, true, false},
      {"another transfer's epoch still receiving", 8, true, false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    KvEpochFence fence;
    const ConnPtr old_writer = NewConn();
    if (c.old_transfer != 0) {
      fence.Open(c.old_transfer, 1);
      if (c.old_wrote) fence.BeginChannelWrite(c.old_transfer, old_writer);
      fence.End(c.old_transfer);
      if (c.old_settled) {
        fence.SettleChannel(old_writer);
        while (fence.NextSettled(c.old_transfer).has_value()) {
        }
      }
    }
    fence.Open(7, 2);
    const ConnPtr b = NewConn();
    EXPECT_EQ(fence.Fenced(7), c.held);
    EXPECT_EQ(fence.HoldIfFenced(7, b, Layer(7, 2, 0)), c.held);
    // Unfence hands nothing back while the fence stands, and a frame that
    // was never held is not the fence's to hand back.
    EXPECT_THAT(fence.Unfence(7), IsEmpty());
  }
}

TEST_F(KvEpochFenceTest, HeldFramesGoOnInArrivalOrderOnceTheOldEpochCompletes) {
  const ConnPtr a = NewConn();
  const ConnPtr b = NewConn();
  const ConnPtr c = NewConn();
  const std::optional<Ticket> old = EndEpoch(1, 1, a);
  fence_.Open(1, 2);
  ASSERT_TRUE(fence_.HoldIfFenced(1, b, Layer(1, 2, 0)));
  ASSERT_TRUE(fence_.HoldIfFenced(1, c, Layer(1, 2, 1)));
  EXPECT_THAT(fence_.Unfence(1), IsEmpty());
  EXPECT_THAT(fence_.SettleChannel(a), Optional(1u));
  // Settled, but not completed yet: still fenced until the receiver has
  // handed the old epoch's blocks back.
  EXPECT_THAT(fence_.Unfence(1), IsEmpty());
  EXPECT_THAT(DrainSettled(1), ElementsAre(*old));
  EXPECT_THAT(Frames(fence_.Unfence(1)), ElementsAre(std::pair(b.get(), 0), std::pair(c.get(), 1)));
  EXPECT_THAT(fence_.Unfence(1), IsEmpty());
  // Not fenced any more: the next frame goes on at once.
  EXPECT_FALSE(fence_.HoldIfFenced(1, b, Layer(1, 2, 2)));
}

TEST_F(KvEpochFenceTest, EndedEpochsOfATransferCompleteOldestFirst) {
  struct Case {
    const char* name;
    // Per epoch 1..n, in the order they end: whether a channel of its own
    // was receiving into it when it ended.
    std::vector<bool> wrote;
    // Epochs whose receive settles, in this order...
    std::vector<uint64_t> settle;
    // ...and the epochs each settle lets complete, in order.
    std::vector<std::vector<uint64_t>> completes;
  };
  const Case cases[] = {
      {"newer epochs with no writer wait for the oldest", {true, false, false}, {1}, {{1, 2, 3}}},
      {"a newer epoch that settles first waits for the older", {true, true}, {2, 1}, {{}, {1, 2}}},
      {"each completes as it settles, oldest first", {true, true}, {1, 2}, {{1}, {2}}},
      {"a gap: the middle one waits for the oldest", {true, false, true}, {1, 3}, {{1, 2}, {3}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    KvEpochFence fence;
    std::map<uint64_t, ConnPtr> writers;  // by epoch
    std::map<Ticket, uint64_t> epoch_of;  // the epoch each ticket names
    for (size_t i = 0; i < c.wrote.size(); ++i) {
      const uint64_t epoch = i + 1;
      fence.Open(5, epoch);
      if (c.wrote[i]) {
        writers[epoch] = NewConn();
        fence.BeginChannelWrite(5, writers[epoch]);
      }
      const std::optional<Ticket> t = fence.End(5).waits_as;
      ASSERT_TRUE(t.has_value()) << "epoch " << epoch << " completed while an epoch wrote";
      epoch_of[*t] = epoch;
    }
    ASSERT_EQ(c.settle.size(), c.completes.size());
    for (size_t i = 0; i < c.settle.size(); ++i) {
      EXPECT_THAT(fence.SettleChannel(writers.at(c.settle[i])), Optional(5u));
      std::vector<uint64_t> completed;
      while (std::optional<Ticket> t = fence.NextSettled(5)) completed.push_back(epoch_of.at(*t));
      EXPECT_EQ(completed, c.completes[i]) << "after epoch " << c.settle[i] << " settled";
    }
    EXPECT_FALSE(fence.Fenced(5));
  }
}

TEST_F(KvEpochFenceTest, ACancelledFencedEpochReleasesItsFramesButWaitsForTheOldChannel) {
  const ConnPtr a = NewConn();
  const ConnPtr b = NewConn();
  const std::optional<Ticket> old = EndEpoch(1, 1, a);
  fence_.Open(1, 2);
  ASSERT_TRUE(fence_.HoldIfFenced(1, b, Layer(1, 2, 3)));
  KvEpochFence::Ended cancelled = fence_.End(1);
  // Its frames go on at once, as frames of no current reservation...
  EXPECT_THAT(Frames(cancelled.released), ElementsAre(std::pair(b.get(), 3)));
  // ...but its blocks are not handed back while the old channel writes.
  ASSERT_TRUE(cancelled.waits_as.has_value());
  EXPECT_EQ(fence_.NextSettled(1), std::nullopt);
  EXPECT_THAT(fence_.SettleChannel(a), Optional(1u));
  EXPECT_THAT(DrainSettled(1), ElementsAre(*old, *cancelled.waits_as));
}

TEST_F(KvEpochFenceTest, AnEpochReopenedAfterItEndedCompletesAfterTheFirst) {
  const ConnPtr a = NewConn();
  const std::optional<Ticket> first = EndEpoch(1, 1, a);
  const std::optional<Ticket> second = EndEpoch(1, 1, nullptr);
  ASSERT_TRUE(second.has_value());
  EXPECT_THAT(fence_.SettleChannel(a), Optional(1u));
  EXPECT_THAT(DrainSettled(1), ElementsAre(*first, *second));
}

TEST_F(KvEpochFenceTest, TransfersDoNotFenceEachOther) {
  const ConnPtr a = NewConn();
  const ConnPtr b = NewConn();
  const std::optional<Ticket> t1 = EndEpoch(1, 1, a);
  EXPECT_EQ(EndEpoch(2, 1, nullptr), std::nullopt);
  fence_.Open(2, 2);
  EXPECT_FALSE(fence_.HoldIfFenced(2, b, Layer(2, 2, 0)));
  EXPECT_EQ(fence_.NextSettled(2), std::nullopt);
  EXPECT_THAT(fence_.SettleChannel(a), Optional(1u));
  EXPECT_THAT(DrainSettled(1), ElementsAre(*t1));
}

TEST_F(KvEpochFenceTest, EndedWritersNameOnlyThatTransfersEndedEpochs) {
  const ConnPtr a = NewConn();
  const ConnPtr b = NewConn();
  const ConnPtr c = NewConn();
  const ConnPtr d = NewConn();
  EndEpoch(1, 1, a);
  EndEpoch(2, 1, b);
  fence_.Open(1, 2);
  EndEpoch(3, 1, c);
  fence_.Open(3, 2);
  fence_.BeginChannelWrite(3, d);  // the current epoch's: not an ended one
  EXPECT_THAT(fence_.EndedWriters(1), ElementsAre(a));
  EXPECT_THAT(fence_.EndedWriters(2), ElementsAre(b));
  EXPECT_THAT(fence_.EndedWriters(3), ElementsAre(c));
  EXPECT_THAT(fence_.EndedWriters(4), IsEmpty());
  fence_.SettleChannel(a);
  EXPECT_THAT(fence_.EndedWriters(1), IsEmpty());
}

TEST_F(KvEpochFenceTest, AClosedConnectionsHeldFramesAreDropped) {
  const ConnPtr a = NewConn();
  const ConnPtr b = NewConn();
  const ConnPtr c = NewConn();
  const std::optional<Ticket> old = EndEpoch(1, 1, a);
  fence_.Open(1, 2);
  ASSERT_TRUE(fence_.HoldIfFenced(1, b, Layer(1, 2, 0)));
  ASSERT_TRUE(fence_.HoldIfFenced(1, c, Layer(1, 2, 1)));
  EXPECT_THAT(fence_.DropConnection(b), IsEmpty());
  fence_.SettleChannel(a);
  EXPECT_THAT(DrainSettled(1), ElementsAre(*old));
  EXPECT_THAT(Frames(fence_.Unfence(1)), ElementsAre(std::pair(c.get(), 1)));
}

TEST_F(KvEpochFenceTest, AClosedConnectionNamesTheCurrentEpochsItWasReceivingInto) {
  const ConnPtr a = NewConn();
  const ConnPtr b = NewConn();
  fence_.Open(1, 1);
  fence_.Open(2, 1);
  fence_.Open(3, 1);
  fence_.BeginChannelWrite(2, a);
  fence_.BeginChannelWrite(3, b);
  EXPECT_THAT(fence_.DropConnection(a), ElementsAre(2u));
  // The receive stays the epoch's until its channel has stopped: the
  // epoch the receiver ends for it waits for that.
  const std::optional<Ticket> t = fence_.End(2).waits_as;
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(fence_.FeedsEnded(a));
  EXPECT_FALSE(fence_.FeedsEnded(b));
  EXPECT_THAT(fence_.SettleChannel(a), Optional(2u));
  EXPECT_THAT(DrainSettled(2), ElementsAre(*t));
}

TEST_F(KvEpochFenceTest, ShutdownTakesEveryWaitingEpochInTheOrderTheyEnded) {
  const ConnPtr a = NewConn();
  const ConnPtr b = NewConn();
  const std::optional<Ticket> t2 = EndEpoch(2, 1, a);
  const std::optional<Ticket> t1 = EndEpoch(1, 1, b);
  const std::optional<Ticket> t1_next = EndEpoch(1, 2, nullptr);
  EXPECT_THAT(fence_.TakeAllEnded(), ElementsAre(*t2, *t1, *t1_next));
  EXPECT_FALSE(fence_.Fenced(1));
  EXPECT_FALSE(fence_.Fenced(2));
  EXPECT_FALSE(fence_.FeedsEnded(a));
  EXPECT_EQ(fence_.SettleChannel(a), std::nullopt);
}

TEST_F(KvEpochFenceTest, TicketsAreNeverReused) {
  const ConnPtr a = NewConn();
  const std::optional<Ticket> first = EndEpoch(1, 1, a);
  fence_.SettleChannel(a);
  ASSERT_THAT(DrainSettled(1), ElementsAre(*first));
  const std::optional<Ticket> second = EndEpoch(1, 2, a);
  ASSERT_TRUE(second.has_value());
  EXPECT_NE(*first, *second);
  EXPECT_THAT(fence_.EndedWriters(1), UnorderedElementsAre(a));
}

}  // namespace
}  // namespace pdserve
