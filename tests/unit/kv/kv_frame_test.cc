#include "common/kv/kv_frame.h"

#include "common/base/host_port.h"
#include "gtest/gtest.h"
#include "tests/testing/kv_test_util.h"

namespace pdserve {
namespace {

using ::pdserve::testing::LayerHeader;

TEST(KvFrameTest, MessageRoundTripsThroughLengthPrefix) {
  const v1::KvFrameHeader h = LayerHeader(1ull << 40, 3, 2, {5, 0, 9}, 128);
  const std::string wire = EncodeKvMessage(h);
  ASSERT_GT(wire.size(), kKvLengthPrefixBytes);
  const uint32_t length = DecodeKvLength(reinterpret_cast<const uint8_t*>(wire.data()));
  EXPECT_EQ(length, wire.size() - kKvLengthPrefixBytes);
  v1::KvFrameHeader parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.substr(kKvLengthPrefixBytes)));
  EXPECT_EQ(parsed.SerializeAsString(), h.SerializeAsString());
  EXPECT_EQ(static_cast<uint8_t>(wire[0]), length & 0xff);  // little-endian
}

TEST(KvFrameTest, LengthLimits) {
  EXPECT_FALSE(CheckKvMessageLength(0).ok());
  EXPECT_TRUE(CheckKvMessageLength(1).ok());
  EXPECT_TRUE(CheckKvMessageLength(kMaxKvMessageBytes).ok());
  EXPECT_FALSE(CheckKvMessageLength(kMaxKvMessageBytes + 1).ok());
}

TEST(KvFrameTest, ShapeChecks) {
  EXPECT_TRUE(CheckKvFrameShape(LayerHeader(1, 1, 0, {0, 1}, 128), 128, 4).ok());
  v1::KvFrameHeader h = LayerHeader(1, 1, 0, {0, 1}, 128);
  h.set_payload_bytes(255);
  EXPECT_FALSE(CheckKvFrameShape(h, 128, 4).ok());
  EXPECT_FALSE(CheckKvFrameShape(LayerHeader(1, 1, 0, {}, 128), 128, 4).ok());
  EXPECT_FALSE(CheckKvFrameShape(LayerHeader(1, 1, 0, {0, 1, 2, 3, 4}, 128), 128, 4).ok());
  v1::KvFrameHeader commit;
  commit.set_kind(v1::KvFrameHeader::COMMIT);
  EXPECT_TRUE(CheckKvFrameShape(commit, 128, 4).ok());
  commit.set_payload_bytes(1);
  EXPECT_FALSE(CheckKvFrameShape(commit, 128, 4).ok());
  v1::KvFrameHeader unspecified;
  EXPECT_FALSE(CheckKvFrameShape(unspecified, 128, 4).ok());
}

// CUDA IPC frames: every block has a source, control frames carry no
// layer fields, an ATTACH needs a handle, and no payload is on the wire.
TEST(KvFrameTest, CudaIpcShapeChecks) {
  v1::KvFrameHeader ipc = LayerHeader(1, 1, 0, {0, 1}, 128);
  ipc.set_payload_path(v1::KvFrameHeader::PAYLOAD_CUDA_IPC);
  ipc.add_src_blocks(5);
  EXPECT_FALSE(CheckKvFrameShape(ipc, 128, 4).ok());  // one source for two blocks
  ipc.add_src_blocks(6);
  EXPECT_TRUE(CheckKvFrameShape(ipc, 128, 4).ok());
  EXPECT_EQ(KvWirePayloadBytes(ipc), 0u);
  EXPECT_EQ(KvWirePayloadBytes(LayerHeader(1, 1, 0, {0, 1}, 128)), 256u);

  v1::KvFrameHeader commit;
  commit.set_kind(v1::KvFrameHeader::COMMIT);
  EXPECT_TRUE(CheckKvFrameShape(commit, 128, 4).ok());
  commit.add_src_blocks(3);
  EXPECT_FALSE(CheckKvFrameShape(commit, 128, 4).ok());
  commit.clear_src_blocks();
  commit.set_payload_path(v1::KvFrameHeader::PAYLOAD_CUDA_IPC);
  EXPECT_FALSE(CheckKvFrameShape(commit, 128, 4).ok());

  v1::KvFrameHeader attach;
  attach.set_kind(v1::KvFrameHeader::ATTACH);
  EXPECT_FALSE(CheckKvFrameShape(attach, 128, 4).ok());
  attach.set_ipc_handle("handle");
  EXPECT_TRUE(CheckKvFrameShape(attach, 128, 4).ok());

  v1::KvFrameHeader bad_path = LayerHeader(1, 1, 0, {0}, 128);
  bad_path.set_payload_path(static_cast<v1::KvFrameHeader::PayloadPath>(7));
  EXPECT_FALSE(CheckKvFrameShape(bad_path, 128, 4).ok());
}

TEST(KvFrameTest, AckCarriesCanonicalCode) {
  EXPECT_TRUE(KvAckToStatus(MakeKvAck(1, 2, absl::OkStatus())).ok());
  const absl::Status st = KvAckToStatus(MakeKvAck(1, 2, absl::DataLossError("short")));
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("short"), absl::string_view::npos);
  v1::KvAck weird;
  weird.set_ok(false);
  weird.set_status_code(99);
  EXPECT_EQ(KvAckToStatus(weird).code(), absl::StatusCode::kUnknown);
}

TEST(HostPortTest, ParsesAndFormats) {
  absl::StatusOr<HostPort> hp = ParseHostPort("decode-0.pdserve:7070");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "decode-0.pdserve");
  EXPECT_EQ(hp->port, 7070);
  hp = ParseHostPort("[::1]:0");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "::1");
  EXPECT_EQ(FormatHostPort("::1", 5), "[::1]:5");
  EXPECT_EQ(ParseHostPort(":80")->host, "");
  EXPECT_FALSE(ParseHostPort("nohost").ok());
  EXPECT_FALSE(ParseHostPort("h:70000").ok());
  EXPECT_FALSE(ParseHostPort("h:").ok());
  EXPECT_FALSE(ParseHostPort("::1:80").ok());
}

}  // namespace
}  // namespace pdserve
