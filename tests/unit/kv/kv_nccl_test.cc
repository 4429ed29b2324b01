// The nccl KV path on CPU: headers on the TCP connection, bytes over the
// connection's peer channel in frame order. The channel is the fake of
// tests/testing/fake_device_memory.h (an in-process queue with the NCCL
// contract: the i-th receive gets the i-th send); the real one is
// common/gpu/nccl/nccl_peer_channel.cc. Covered: round trips, frames the
// receiver does not want (their bytes are still taken off the channel, so
// later transfers stay intact), a refused hello, lost bytes, and a channel
// rebuilt after a failure.
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/kv/framed_kv_receiver.h"
#include "common/kv/framed_kv_sender.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_device_memory.h"
#include "tests/testing/kv_test_util.h"

namespace pdserve {
namespace {

using ::pdserve::testing::DoneProbe;
using ::pdserve::testing::ExpectBlocksCopied;
using ::pdserve::testing::FakeDeviceCounters;
using ::pdserve::testing::MakeCache;
using ::pdserve::testing::MakeFakeDeviceCache;
using ::pdserve::testing::SendAllLayers;
using ::pdserve::testing::SilentListener;
using ::pdserve::testing::SmallKvLayout;
using ::testing::HasSubstr;

class FramedKvNcclTest : public ::testing::Test {
 protected:
  void SetUp() override { StartReceiver(dst_.get(), absl::Seconds(10)); }

  // `sender_idle` also bounds a sender's wait for D to take its bytes, and
  // an abandon's drain.
  void StartReceiver(KvCache* cache, absl::Duration idle_timeout,
                     absl::Duration sender_idle = absl::Seconds(2)) {
    FramedKvReceiverOptions options;
    options.listen_address = "127.0.0.1:0";
    options.idle_timeout = idle_timeout;
    auto receiver = FramedKvReceiver::Create(cache, options);
    ASSERT_TRUE(receiver.ok()) << receiver.status();
    receiver_ = std::move(receiver).value();
    FramedKvSenderOptions so;
    so.device_pool = src_.get();
    so.connect_timeout = absl::Seconds(2);
    so.idle_timeout = sender_idle;
    auto sender = FramedKvSender::Create(so);
    ASSERT_TRUE(sender.ok()) << sender.status();
    sender_ = std::move(sender).value();
  }

  KvTransferTarget Target(uint64_t id, uint64_t epoch = 1) {
    KvTransferTarget t{absl::StrCat("127.0.0.1:", receiver_->port()), id, epoch,
                       absl::Now() + absl::Seconds(10)};
    t.path = KvPath::kNccl;
    return t;
  }

  absl::Status Send(const KvTransferTarget& t, const std::vector<int32_t>& src) {
    return SendAllLayers(*sender_, t, *src_, src, 9);
  }

  // Reserves dst for transfer `id` (epoch 1, every layer).
  absl::Status Reserve(uint64_t id, const std::vector<int32_t>& dst, DoneProbe& probe,
                       absl::Duration within = absl::Seconds(10)) {
    return receiver_->Expect(id, 1, dst, src_->layout().n_layers, absl::Now() + within,
                             probe.Callback());
  }

  // Until `counter` exceeds `above` (bounded); whether it did.
  static bool AwaitAbove(const std::atomic<int>& counter, int above) {
    for (int i = 0; i < 2000 && counter.load() <= above; ++i) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    return counter.load() > above;
  }

  // A receiver and sender with long timeouts and a transfer 1 whose first
  // frame (logical 0 from src block 4 into `dst`) is sent but held: D sits
  // in its channel receive until the test clears hold_receives. Returns the
  // transfer's target.
  KvTransferTarget StartStalled(const std::vector<int32_t>& dst, DoneProbe& probe) {
    StartReceiver(dst_.get(), absl::Minutes(10), absl::Minutes(10));
    dst_counters_.hold_receives = true;
    EXPECT_TRUE(Reserve(1, dst, probe, absl::Minutes(10)).ok());
    const KvTransferTarget t = Target(1);
    std::vector<int32_t> logical(dst.size()), src(dst.size());
    for (size_t i = 0; i < dst.size(); ++i) logical[i] = static_cast<int32_t>(i), src[i] = 4 + i;
    EXPECT_TRUE(sender_->SendLayer(t, 0, logical, *src_, src).ok());
    return t;
  }

  // Transfers A (1 -> D block 2) and B (2 -> D block 5) on one connection,
  // B's first layer (src block 8) already sent.
  void StartSharedPair(DoneProbe& a, DoneProbe& b) {
    ASSERT_TRUE(Reserve(1, {2}, a).ok());
    ASSERT_TRUE(Reserve(2, {5}, b).ok());
    ASSERT_TRUE(sender_->SendLayer(Target(2), 0, {0}, *src_, {8}).ok());
  }

  // With StartSharedPair's A and B once B's first layer is in: A's layer 0
  // (src block 3) is sent and D sits in its receive, held until the test
  // clears hold_receives.
  void HoldAReceiveOfA() {
    ASSERT_TRUE(AwaitAbove(dst_counters_.channel_blocks, 0));
    dst_counters_.hold_receives = true;
    const int waits = dst_counters_.channel_waits.load();
    ASSERT_TRUE(sender_->SendLayer(Target(1), 0, {0}, *src_, {3}).ok());
    ASSERT_TRUE(AwaitAbove(dst_counters_.channel_waits, waits));
  }

  // StartSharedPair's B: its other layers and commit go through, and its
  // block lands intact.
  void CompleteB(DoneProbe& b) {
    const int layers = src_->layout().n_layers;
    const KvTransferTarget tb = Target(2);
    for (int l = 1; l < layers; ++l) ASSERT_TRUE(sender_->SendLayer(tb, l, {0}, *src_, {8}).ok());
    const absl::Status st = sender_->Commit(tb, KvCommit{layers, 0, 7});
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_TRUE(b.Wait().ok());
    ExpectBlocksCopied(*src_, {8}, *dst_, {5});
  }

  absl::Status Transfer(uint64_t id, const std::vector<int32_t>& src,
                        const std::vector<int32_t>& dst, DoneProbe& probe) {
    const absl::Status st = Reserve(id, dst, probe);
    return st.ok() ? Send(Target(id), src) : st;
  }

  // Long timeouts, a slow channel abort, and transfer 1 (epoch 1, D block
  // 2) whose receive sits on a silent channel until its 1 s wait runs out:
  // returns once the deadline has interrupted it, while the abort still
  // runs.
  void StartTearDown(DoneProbe& probe) {
    StartReceiver(dst_.get(), absl::Minutes(10), absl::Minutes(10));
    src_counters_.lose_sends = true;
    dst_counters_.abort_delay_ms = 500;
    ASSERT_TRUE(Reserve(1, {2}, probe, absl::Seconds(1)).ok());
    ASSERT_TRUE(sender_->SendLayer(Target(1), 0, {0}, *src_, {4}).ok());
    ASSERT_TRUE(AwaitAbove(dst_counters_.channel_interrupts, 0));
  }

  // Epoch 2 of transfer 1 into D block 2.
  absl::Status ExpectEpoch2(DoneProbe& probe) {
    return receiver_->Expect(1, 2, {2}, src_->layout().n_layers, absl::Now() + absl::Seconds(10),
                             probe.Callback());
  }

  // Epoch 2 of transfer 1 from another prefill worker over TCP: host_src_
  // block 6 as logical block 0, then its commit (which waits for the ack).
  absl::Status SendEpoch2OverTcp() {
    auto tcp_sender = FramedKvSender::Create();
    if (!tcp_sender.ok()) return tcp_sender.status();
    KvTransferTarget t = Target(1, 2);
    t.path = KvPath::kTcp;
    return SendAllLayers(**tcp_sender, t, *host_src_, {6}, 4);
  }

  FakeDeviceCounters src_counters_, dst_counters_;
  std::unique_ptr<KvCache> src_ = MakeFakeDeviceCache(SmallKvLayout(), 12, 1, &src_counters_);
  std::unique_ptr<KvCache> dst_ = MakeFakeDeviceCache(SmallKvLayout(), 10, 2, &dst_counters_);
  // A host cache for the refusal tests; declared before the receiver that
  // uses it, so it outlives the receiver's I/O thread.
  std::unique_ptr<KvCache> host_ = MakeCache(10, 0);
  std::unique_ptr<KvCache> host_src_ = MakeCache(12, 0x5a);  // another prefill worker's
  std::unique_ptr<FramedKvReceiver> receiver_;
  std::unique_ptr<FramedKvSender> sender_;
};

TEST_F(FramedKvNcclTest, BytesTravelOverTheChannelInFrameOrder) {
  DoneProbe a, b;
  ASSERT_TRUE(Transfer(1, {11, 0, 7}, {4, 9, 1}, a).ok());
  ASSERT_TRUE(Transfer(2, {5}, {0}, b).ok());
  absl::StatusOr<KvCommit> ca = a.Wait();
  ASSERT_TRUE(ca.ok()) << ca.status();
  EXPECT_EQ(ca->first_token, 9);
  ASSERT_TRUE(b.Wait().ok());
  ExpectBlocksCopied(*src_, {11, 0, 7}, *dst_, {4, 9, 1});
  ExpectBlocksCopied(*src_, {5}, *dst_, {0});
  const int layers = src_->layout().n_layers;
  EXPECT_EQ(dst_counters_.channel_blocks.load(), 4 * layers);
  EXPECT_EQ(src_counters_.to_host.load(), 0);  // nothing staged through host memory
  EXPECT_EQ(dst_counters_.from_host.load(), 0);
}

// A transfer the receiver does not know is refused, but its bytes are taken
// off the channel: the transfer after it arrives intact.
TEST_F(FramedKvNcclTest, UnwantedFramesKeepTheChannelInStep) {
  const absl::Status unknown = Send(Target(77), {3, 4});
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound) << unknown;
  DoneProbe probe;
  ASSERT_TRUE(Transfer(1, {8, 2}, {6, 7}, probe).ok());
  ASSERT_TRUE(probe.Wait().ok());
  ExpectBlocksCopied(*src_, {8, 2}, *dst_, {6, 7});
  EXPECT_EQ(receiver_->num_pending(), 0u);
}

TEST_F(FramedKvNcclTest, ReceiverThatCannotUseNcclRefusesTheHelloWithAReason) {
  StartReceiver(host_.get(), absl::Seconds(10));
  DoneProbe probe;
  ASSERT_TRUE(Reserve(1, {0}, probe).ok());
  const absl::Status st = Send(Target(1), {0});
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(st.message(), HasSubstr("NCCL"));
  // The reservation ends either way: by the sender's ABORT (over another
  // connection) or by the router's cancel.
  receiver_->Cancel(1);
  const absl::StatusCode code = probe.Wait().status().code();
  EXPECT_TRUE(code == absl::StatusCode::kCancelled || code == absl::StatusCode::kAborted) << code;
}

// Bytes that never arrive end the receiving transfer at the frame timeout
// (DATA_LOSS), the channel is rebuilt, and the next transfer goes through.
TEST_F(FramedKvNcclTest, LostBytesEndTheTransferAndANewChannelServesTheNext) {
  StartReceiver(dst_.get(), absl::Milliseconds(300));
  src_counters_.lose_sends = true;
  DoneProbe lost;
  EXPECT_FALSE(Transfer(1, {1}, {2}, lost).ok());
  EXPECT_EQ(lost.Wait().status().code(), absl::StatusCode::kDataLoss) << lost.Wait().status();
  src_counters_.lose_sends = false;
  DoneProbe ok;
  const absl::Status st = Transfer(2, {3}, {4}, ok);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_TRUE(ok.Wait().ok());
  ExpectBlocksCopied(*src_, {3}, *dst_, {4});
  EXPECT_EQ(receiver_->num_pending(), 0u);
}

// A channel whose bytes never come holds up only its own connection: a TCP
// transfer from another prefill worker lands meanwhile. Cancelling the
// stalled transfer returns at once but leaves its receive to end; once the
// bytes come the reservation ends, and the same channel carries the next
// nccl transfer.
TEST_F(FramedKvNcclTest, AStalledChannelHoldsUpOnlyItsOwnConnection) {
  DoneProbe stalled;
  const KvTransferTarget stalled_target = StartStalled({2, 3}, stalled);

  auto tcp_sender = FramedKvSender::Create();
  ASSERT_TRUE(tcp_sender.ok());
  DoneProbe other;
  ASSERT_TRUE(Reserve(2, {7}, other, absl::Minutes(10)).ok());
  KvTransferTarget tcp_target = Target(2);
  tcp_target.path = KvPath::kTcp;
  ASSERT_TRUE(SendAllLayers(**tcp_sender, tcp_target, *host_src_, {6}, 4).ok());
  ASSERT_TRUE(other.Wait().ok());
  ExpectBlocksCopied(*host_src_, {6}, *dst_, {7});
  EXPECT_EQ(stalled.calls(), 0);  // still receiving

  ASSERT_TRUE(AwaitAbove(dst_counters_.channel_waits, 0));  // D is in its receive
  receiver_->Cancel(1);
  EXPECT_EQ(stalled.calls(), 0);  // the channel may still write into its blocks
  dst_counters_.hold_receives = false;
  EXPECT_EQ(stalled.Wait().status().code(), absl::StatusCode::kCancelled);
  sender_->Abort(stalled_target, "test");
  const int closed = dst_counters_.channels_closed.load();
  DoneProbe next;
  ASSERT_TRUE(Transfer(3, {8}, {9}, next).ok());
  ASSERT_TRUE(next.Wait().ok());
  ExpectBlocksCopied(*src_, {8}, *dst_, {9});
  EXPECT_EQ(dst_counters_.channels_closed.load(), closed);  // no channel was rebuilt
  EXPECT_EQ(receiver_->num_pending(), 0u);
}

// A cancel while the channel receives a frame of the transfer neither waits
// for that receive nor breaks the channel: the receive completes, then the
// reservation ends (its blocks were the receiver's until then), and another
// transfer on the same connection and channel lands intact.
TEST_F(FramedKvNcclTest, ACancelLetsTheReceiveInProgressFinishAndKeepsTheChannel) {
  StartReceiver(dst_.get(), absl::Seconds(10), absl::Minutes(10));  // only the hold stalls
  DoneProbe a, b;
  ASSERT_NO_FATAL_FAILURE(StartSharedPair(a, b));
  ASSERT_NO_FATAL_FAILURE(HoldAReceiveOfA());
  receiver_->Cancel(1);
  EXPECT_EQ(a.calls(), 0);
  EXPECT_EQ(receiver_->num_pending(), 2u);
  dst_counters_.hold_receives = false;
  EXPECT_EQ(a.Wait().status().code(), absl::StatusCode::kCancelled);
  ASSERT_NO_FATAL_FAILURE(CompleteB(b));
  EXPECT_EQ(receiver_->num_pending(), 0u);
  sender_->Abort(Target(1), "test");
}

// A reservation whose wait runs out while its receive sits on a silent
// channel ends at its deadline, not at the (here ten-minute) frame timeout
// nor when the sender gives up (ten minutes too): the receive is
// interrupted.
TEST_F(FramedKvNcclTest, ADeadlineInterruptsASilentReceive) {
  DoneProbe probe;
  ASSERT_NO_FATAL_FAILURE(StartTearDown(probe));
  EXPECT_EQ(probe.Wait(absl::Seconds(60)).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GT(dst_counters_.channel_interrupts.load(), 0);
  EXPECT_EQ(receiver_->num_pending(), 0u);
  sender_->Abort(Target(1), "test");
}

// A deadline tears a silent channel down in the background (its abort takes
// a while here). A new epoch of the same transfer (a prefill retry) reuses
// the blocks: Expect returns at once, and the new epoch's frames (from
// another prefill worker, over TCP) wait until that channel is gone, so the
// old epoch's on_done comes first and the new bytes are what the blocks hold.
TEST_F(FramedKvNcclTest, ANewEpochWaitsForAChannelStillBeingTornDown) {
  DoneProbe old_epoch;
  ASSERT_NO_FATAL_FAILURE(StartTearDown(old_epoch));
  DoneProbe next;
  ASSERT_TRUE(ExpectEpoch2(next).ok());
  const absl::Status st = SendEpoch2OverTcp();
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_TRUE(next.Wait().ok());
  EXPECT_EQ(old_epoch.Wait().status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LE(old_epoch.called_at(), next.called_at());
  ExpectBlocksCopied(*host_src_, {6}, *dst_, {2});
  EXPECT_EQ(receiver_->num_pending(), 0u);
  sender_->Abort(Target(1), "test");
}

// A new epoch that ends while it waits for an older one (here: cancelled)
// hands the blocks back only after the older one has stopped writing too.
TEST_F(FramedKvNcclTest, ANewEpochEndedWhileWaitingCompletesAfterTheOldOne) {
  DoneProbe old_epoch;
  ASSERT_NO_FATAL_FAILURE(StartTearDown(old_epoch));
  DoneProbe next;
  ASSERT_TRUE(ExpectEpoch2(next).ok());
  receiver_->Cancel(1);
  EXPECT_EQ(next.Wait().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(old_epoch.Wait().status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LE(old_epoch.called_at(), next.called_at());
  EXPECT_EQ(receiver_->num_pending(), 0u);
  sender_->Abort(Target(1), "test");
}

// The same while the old epoch (cancelled) is merely still receiving, from
// a peer that may never send: the new epoch interrupts that receive rather
// than wait for it (here it would wait for good: the hold is never lifted),
// and its frames land once it has stopped.
TEST_F(FramedKvNcclTest, ANewEpochInterruptsTheOldEpochsReceive) {
  StartReceiver(dst_.get(), absl::Seconds(10), absl::Minutes(10));
  DoneProbe a, b;
  ASSERT_NO_FATAL_FAILURE(StartSharedPair(a, b));
  ASSERT_NO_FATAL_FAILURE(HoldAReceiveOfA());
  receiver_->Cancel(1);
  DoneProbe next;
  ASSERT_TRUE(ExpectEpoch2(next).ok());
  const absl::Status st = SendEpoch2OverTcp();
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_TRUE(next.Wait().ok());
  EXPECT_EQ(a.Wait().status().code(), absl::StatusCode::kCancelled);
  EXPECT_LE(a.called_at(), next.called_at());
  ExpectBlocksCopied(*host_src_, {6}, *dst_, {2});
  receiver_->Cancel(2);  // its connection went with A's channel
  EXPECT_EQ(b.Wait().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(receiver_->num_pending(), 0u);
  sender_->Abort(Target(1), "test");
}

// The receiver going away while a channel is receiving stops the receive
// and ends the reservation, without waiting for the frame timeout.
TEST_F(FramedKvNcclTest, ShutdownInterruptsAReceiveInProgress) {
  DoneProbe stalled;
  const KvTransferTarget target = StartStalled({2}, stalled);
  // Wait until D has read the header (it then receives on the channel).
  ASSERT_TRUE(AwaitAbove(dst_counters_.channel_waits, 0));
  receiver_.reset();
  EXPECT_EQ(stalled.Wait().status().code(), absl::StatusCode::kCancelled);
  sender_->Abort(target, "test");
}

// A transfer that fails while its frames wait on the channel's thread
// (here: D cancelled it, and its next header came back NOT_FOUND) sends
// neither their bytes nor their headers; frames whose bytes went keep their
// headers. Either way the channel stays in step, so another transfer on the
// same connection still lands intact.
TEST_F(FramedKvNcclTest, AFailedTransfersQueuedFramesLeaveTheChannelInStep) {
  const int layers = src_->layout().n_layers;
  DoneProbe a, b;
  ASSERT_NO_FATAL_FAILURE(StartSharedPair(a, b));
  const KvTransferTarget ta = Target(1), tb = Target(2);
  receiver_->Cancel(1);
  EXPECT_EQ(a.Wait().status().code(), absl::StatusCode::kCancelled);
  // Slow sends: A's frames pile up on the channel's thread while the
  // NOT_FOUND for its first one comes back.
  src_counters_.send_delay_ms = 20;
  for (int l = 0; l < layers; ++l) {
    if (!sender_->SendLayer(ta, l, {0}, *src_, {3}).ok()) break;
  }
  // B's frames queue behind A's on the same connection and channel.
  for (int l = 1; l < layers; ++l) ASSERT_TRUE(sender_->SendLayer(tb, l, {0}, *src_, {8}).ok());
  const absl::Status committed = sender_->Commit(tb, KvCommit{layers, 0, 7});
  src_counters_.send_delay_ms = 0;
  ASSERT_TRUE(committed.ok()) << committed;
  ASSERT_TRUE(b.Wait().ok());
  ExpectBlocksCopied(*src_, {8}, *dst_, {5});
  sender_->Abort(ta, "test");
  EXPECT_EQ(receiver_->num_pending(), 0u);
}

// One transfer's failure on a shared connection costs the others nothing:
// its abandon drains the channel (every byte already sent gets received)
// instead of ending it, and another transfer on it still lands intact.
TEST_F(FramedKvNcclTest, AnotherTransfersFailureLeavesTheChannelToTheOthers) {
  const int layers = src_->layout().n_layers;
  DoneProbe a, b;
  ASSERT_NO_FATAL_FAILURE(StartSharedPair(a, b));
  const KvTransferTarget ta = Target(1);
  ASSERT_TRUE(sender_->SendLayer(ta, 0, {0}, *src_, {3}).ok());
  receiver_->Cancel(1);
  EXPECT_FALSE(sender_->Commit(ta, KvCommit{layers, 0, 1}).ok());
  ASSERT_NO_FATAL_FAILURE(CompleteB(b));
  EXPECT_EQ(receiver_->num_pending(), 0u);
}

// A channel that cannot drain (D stopped taking its bytes) is ended by the
// abandon instead, and the other transfers on it fail with UNAVAILABLE (the
// router retries those elsewhere), never with the failed one's own code.
TEST_F(FramedKvNcclTest, AChannelThatCannotDrainEndsTheOthersAsUnavailable) {
  StartReceiver(dst_.get(), absl::Milliseconds(300));
  const int layers = src_->layout().n_layers;
  DoneProbe a, b;
  ASSERT_NO_FATAL_FAILURE(StartSharedPair(a, b));
  const KvTransferTarget ta = Target(1), tb = Target(2);
  // The channel is up once B's first frame is in.
  ASSERT_TRUE(AwaitAbove(dst_counters_.channel_blocks, 0));
  src_counters_.lose_sends = true;  // A's bytes never arrive
  const int sends = src_counters_.channel_sends.load();
  ASSERT_TRUE(sender_->SendLayer(ta, 0, {0}, *src_, {3}).ok());
  ASSERT_TRUE(AwaitAbove(src_counters_.channel_sends, sends));
  sender_->Abort(ta, "test");
  src_counters_.lose_sends = false;
  absl::Status st;
  for (int l = 1; l < layers && st.ok(); ++l) st = sender_->SendLayer(tb, l, {0}, *src_, {8});
  if (st.ok()) st = sender_->Commit(tb, KvCommit{layers, 0, 7});
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  receiver_->Cancel(1);
  receiver_->Cancel(2);
  EXPECT_FALSE(b.Wait().ok());
  EXPECT_FALSE(a.Wait().ok());  // once its receive has given up (Cancel does not wait)
  EXPECT_EQ(receiver_->num_pending(), 0u);
}

// P joins on the channel's thread: SendLayer returns while the join still
// waits for a receiver that never answers, and Abort interrupts the join
// instead of waiting out its (here ten-minute) deadline.
TEST_F(FramedKvNcclTest, TheSenderJoinsOffTheCallersThreadAndAbortInterruptsIt) {
  SilentListener silent;
  FramedKvSenderOptions so;
  so.device_pool = src_.get();
  so.connect_timeout = absl::Minutes(10);
  auto sender = FramedKvSender::Create(so);
  ASSERT_TRUE(sender.ok());
  KvTransferTarget t{absl::StrCat("127.0.0.1:", silent.port()), 1, 1,
                     absl::Now() + absl::Minutes(10)};
  t.path = KvPath::kNccl;
  const int joins = src_counters_.joins_started.load();
  ASSERT_TRUE((*sender)->SendLayer(t, 0, {0}, *src_, {1}).ok());
  ASSERT_TRUE((*sender)->SendLayer(t, 1, {0}, *src_, {1}).ok());
  ASSERT_TRUE(AwaitAbove(src_counters_.joins_started, joins));
  (*sender)->Abort(t, "test");
  // The transfer is gone: a new epoch of it may start at once.
  t.epoch = 2;
  EXPECT_NE((*sender)->SendLayer(t, 0, {0}, *src_, {1}).code(),
            absl::StatusCode::kFailedPrecondition);
  (*sender)->Abort(t, "test");
}

TEST_F(FramedKvNcclTest, SenderWithoutADevicePoolRefusesNcclTargets) {
  auto sender = FramedKvSender::Create();
  ASSERT_TRUE(sender.ok());
  EXPECT_EQ((*sender)->SendLayer(Target(1), 0, {0}, *src_, {0}).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace pdserve
