// The cuda_ipc KV path on CPU: the sender attaches its (fake) device pool
// on each connection and sends layer headers with its own block ids; the
// receiver pulls the blocks device to device into its reservation. Also:
// the refusals that make an impossible pairing a clear error, and bad
// frames. The device is tests/testing/fake_device_memory.h; the same protocol
// runs between two processes on one GPU in tests/gpu/device_check.sh.
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/kv/framed_kv_receiver.h"
#include "common/kv/framed_kv_sender.h"
#include "common/kv/kv_frame.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_device_memory.h"
#include "tests/testing/kv_test_util.h"

namespace pdserve {
namespace {

using ::pdserve::testing::DoneProbe;
using ::pdserve::testing::ExpectBlocksCopied;
using ::pdserve::testing::FakeDeviceCounters;
using ::pdserve::testing::LayerHeader;
using ::pdserve::testing::MakeCache;
using ::pdserve::testing::MakeFakeDeviceCache;
using ::pdserve::testing::RawKvClient;
using ::pdserve::testing::SendAllLayers;
using ::pdserve::testing::SmallKvLayout;
using ::testing::HasSubstr;

class FramedKvCudaIpcTest : public ::testing::Test {
 protected:
  void SetUp() override { StartReceiver(dst_.get()); }

  void StartReceiver(KvCache* cache) {
    FramedKvReceiverOptions options;
    options.listen_address = "127.0.0.1:0";
    auto receiver = FramedKvReceiver::Create(cache, options);
    ASSERT_TRUE(receiver.ok()) << receiver.status();
    receiver_ = std::move(receiver).value();
  }

  std::unique_ptr<FramedKvSender> Sender(const KvCache* pool) {
    FramedKvSenderOptions options;
    options.device_pool = pool;
    auto sender = FramedKvSender::Create(options);
    EXPECT_TRUE(sender.ok()) << sender.status();
    return sender.ok() ? std::move(*sender) : nullptr;
  }

  KvTransferTarget Target(uint64_t id, KvPath path = KvPath::kCudaIpc) {
    KvTransferTarget t{absl::StrCat("127.0.0.1:", receiver_->port()), id, 1,
                       absl::Now() + absl::Seconds(10)};
    t.path = path;
    return t;
  }

  // Expects, sends every layer of src as logical 0..n-1, commits.
  absl::Status Transfer(KvSender& sender, uint64_t id, const std::vector<int32_t>& src,
                        const std::vector<int32_t>& dst, DoneProbe& probe,
                        KvPath path = KvPath::kCudaIpc) {
    const absl::Status st = receiver_->Expect(id, 1, dst, src_->layout().n_layers,
                                              absl::Now() + absl::Seconds(10), probe.Callback());
    return st.ok() ? SendAllLayers(sender, Target(id, path), *src_, src, 3) : st;
  }


  FakeDeviceCounters src_counters_, dst_counters_;
  std::unique_ptr<KvCache> src_ = MakeFakeDeviceCache(SmallKvLayout(), 12, 1, &src_counters_);
  std::unique_ptr<KvCache> dst_ = MakeFakeDeviceCache(SmallKvLayout(), 10, 2, &dst_counters_);
  // A host cache for the refusal tests; declared before the receiver that
  // uses it, so it outlives the receiver's I/O thread.
  std::unique_ptr<KvCache> host_ = MakeCache(10, 0);
  std::unique_ptr<FramedKvReceiver> receiver_;
};

TEST_F(FramedKvCudaIpcTest, ReceiverPullsBlocksFromTheAttachedPool) {
  auto sender = Sender(src_.get());
  ASSERT_NE(sender, nullptr);
  const std::vector<int32_t> src = {11, 0, 7};
  const std::vector<int32_t> dst = {4, 9, 1};
  DoneProbe probe;
  ASSERT_TRUE(Transfer(*sender, 1, src, dst, probe).ok());
  absl::StatusOr<KvCommit> commit = probe.Wait();
  ASSERT_TRUE(commit.ok()) << commit.status();
  EXPECT_EQ(commit->first_token, 3);
  EXPECT_EQ(commit->total_bytes,
            src.size() * src_->layout().n_layers * src_->layout().bytes_per_layer_block());
  ExpectBlocksCopied(*src_, src, *dst_, dst);
  // Device to device only: nothing was staged through host memory.
  EXPECT_EQ(dst_counters_.device_copies.load(), 3 * src_->layout().n_layers);
  EXPECT_EQ(src_counters_.to_host.load(), 0);
  EXPECT_EQ(dst_counters_.from_host.load(), 0);

  // The connection stays attached for the next transfer.
  DoneProbe second;
  ASSERT_TRUE(Transfer(*sender, 2, {5, 6}, {0, 2}, second).ok());
  ASSERT_TRUE(second.Wait().ok());
  ExpectBlocksCopied(*src_, {5, 6}, *dst_, {0, 2});
}

TEST_F(FramedKvCudaIpcTest, TcpAndIpcTransfersShareASender) {
  auto sender = Sender(src_.get());
  ASSERT_NE(sender, nullptr);
  DoneProbe a, b;
  ASSERT_TRUE(Transfer(*sender, 1, {1, 2}, {3, 4}, a, KvPath::kTcp).ok());
  ASSERT_TRUE(Transfer(*sender, 2, {8}, {7}, b, KvPath::kCudaIpc).ok());
  ASSERT_TRUE(a.Wait().ok());
  ASSERT_TRUE(b.Wait().ok());
  ExpectBlocksCopied(*src_, {1, 2}, *dst_, {3, 4});
  ExpectBlocksCopied(*src_, {8}, *dst_, {7});
  EXPECT_EQ(src_counters_.to_host.load(), 2 * src_->layout().n_layers);  // the tcp one
}

TEST_F(FramedKvCudaIpcTest, HostCacheReceiverRefusesTheAttachWithAReason) {
  StartReceiver(host_.get());
  auto sender = Sender(src_.get());
  ASSERT_NE(sender, nullptr);
  DoneProbe probe;
  const absl::Status st = Transfer(*sender, 1, {0}, {0}, probe);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(st.message(), HasSubstr("host memory"));
  // The reservation ends either way: by the sender's ABORT (over another
  // connection) or by the router's cancel.
  receiver_->Cancel(1);
  const absl::StatusCode code = probe.Wait().status().code();
  EXPECT_TRUE(code == absl::StatusCode::kCancelled || code == absl::StatusCode::kAborted) << code;
  EXPECT_EQ(receiver_->num_pending(), 0u);
}

TEST_F(FramedKvCudaIpcTest, UnmappablePoolIsAClearError) {
  dst_counters_.refuse_peers = true;
  auto sender = Sender(src_.get());
  ASSERT_NE(sender, nullptr);
  DoneProbe probe;
  const absl::Status st = Transfer(*sender, 1, {0}, {0}, probe);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(st.message(), HasSubstr("one node"));
  // Remembered, so that auto sends this endpoint tcp from now on.
  EXPECT_TRUE(sender->CudaIpcRefused(Target(1).endpoint));
  EXPECT_FALSE(sender->CudaIpcRefused("127.0.0.1:1"));
  // The reservation ends either way: by the sender's ABORT (over another
  // connection) or by the router's cancel.
  receiver_->Cancel(1);
  const absl::StatusCode code = probe.Wait().status().code();
  EXPECT_TRUE(code == absl::StatusCode::kCancelled || code == absl::StatusCode::kAborted) << code;
}

TEST_F(FramedKvCudaIpcTest, SenderWithoutADevicePoolRefusesIpcTargets) {
  auto sender = FramedKvSender::Create();
  ASSERT_TRUE(sender.ok());
  const absl::Status st = (*sender)->SendLayer(Target(1), 0, {0}, *src_, {0});
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  std::unique_ptr<KvCache> host = MakeCache(4, 0);
  FramedKvSenderOptions options;
  options.device_pool = host.get();
  EXPECT_EQ(FramedKvSender::Create(options).status().code(), absl::StatusCode::kFailedPrecondition);
}

// Hand-made frames: an IPC layer before any attach, and a source block
// outside the attached pool, each end the transfer and close the connection.
TEST_F(FramedKvCudaIpcTest, BadIpcFramesAreRejected) {
  const int64_t bb = src_->layout().bytes_per_layer_block();
  for (int c = 0; c < 2; ++c) {
    DoneProbe probe;
    ASSERT_TRUE(receiver_->Expect(10 + c, 1, {0, 1}, src_->layout().n_layers,
                                  absl::Now() + absl::Seconds(10), probe.Callback())
                    .ok());
    RawKvClient client(receiver_->port());
    if (c == 1) {
      v1::KvFrameHeader attach;
      attach.set_kind(v1::KvFrameHeader::ATTACH);
      attach.set_ipc_handle(*src_->device_memory()->ExportHandle());
      attach.set_pool_bytes(KvCache::PoolBytes(src_->layout(), src_->num_ids()));
      attach.set_pool_blocks(src_->num_ids());
      ASSERT_TRUE(client.SendHeader(attach));
    }
    v1::KvFrameHeader h = LayerHeader(10 + c, 1, 0, {0}, bb);
    h.set_payload_path(v1::KvFrameHeader::PAYLOAD_CUDA_IPC);
    h.add_src_blocks(c == 0 ? 0 : 99);
    ASSERT_TRUE(client.SendHeader(h));
    const absl::StatusOr<KvCommit> result = probe.Wait();
    EXPECT_EQ(result.status().code(), c == 0 ? absl::StatusCode::kFailedPrecondition
                                             : absl::StatusCode::kInvalidArgument)
        << result.status();
  }
  EXPECT_EQ(receiver_->num_pending(), 0u);
}

}  // namespace
}  // namespace pdserve
