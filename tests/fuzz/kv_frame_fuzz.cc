// libFuzzer target for the KV data plane's frame parsing: the input is a
// byte stream as a receiver would read it off a socket — [u32 length]
// [KvFrameHeader][payload], repeated — followed by the same bytes read as
// an ack. Every step must end in a status, never a crash, an unbounded
// allocation or a read past the input: lengths are checked before anything
// is allocated, shapes before any payload byte is consumed.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/kv/kv_frame.h"
#include "google/protobuf/stubs/logging.h"

namespace {

// SmolLM2's layer-block (30 layers share it: 3 KV heads x 64 dims x 16
// tokens x f16 x K and V) and a pool of 1024 blocks.
constexpr int64_t kBlockBytes = 12288;
constexpr int64_t kMaxBlocks = 1024;

volatile uint64_t g_sink = 0;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // protobuf logs every non-UTF-8 string it refuses; here that is the point.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  size_t pos = 0;
  while (size - pos >= pdserve::kKvLengthPrefixBytes) {
    const uint32_t length = pdserve::DecodeKvLength(data + pos);
    pos += pdserve::kKvLengthPrefixBytes;
    if (!pdserve::CheckKvMessageLength(length).ok() || length > size - pos) break;
    pdserve::v1::KvFrameHeader header;
    if (!header.ParseFromArray(data + pos, static_cast<int>(length))) break;
    pos += length;
    if (!pdserve::CheckKvFrameShape(header, kBlockBytes, kMaxBlocks).ok()) break;
    // A checked shape bounds the payload; skip it as the receiver would
    // (CUDA IPC frames carry none on the wire).
    if (header.payload_bytes() > kBlockBytes * kMaxBlocks) __builtin_trap();  // let too much through
    if (header.payload_path() == pdserve::v1::KvFrameHeader::PAYLOAD_CUDA_IPC &&
        header.src_blocks_size() != header.block_indices_size()) {
      __builtin_trap();  // the shape check must pair every block with its source
    }
    const uint64_t payload = pdserve::KvWirePayloadBytes(header);
    if (payload > size - pos) break;
    for (uint32_t b : header.block_indices()) g_sink = g_sink + b;
    pos += static_cast<size_t>(payload);
  }
  // The same bytes as an ack from a receiver.
  pdserve::v1::KvAck ack;
  if (ack.ParseFromArray(data, static_cast<int>(size))) {
    const absl::Status s = pdserve::KvAckToStatus(ack);
    g_sink = g_sink + static_cast<uint64_t>(s.code()) + s.message().size();
    // Round trip through the encoder: what we send must parse back.
    const std::string wire = pdserve::EncodeKvMessage(pdserve::MakeKvAck(
        ack.transfer_id(), ack.epoch(), s));
    pdserve::v1::KvAck back;
    if (!back.ParseFromArray(wire.data() + pdserve::kKvLengthPrefixBytes,
                             static_cast<int>(wire.size() - pdserve::kKvLengthPrefixBytes))) {
      __builtin_trap();
    }
    if (pdserve::KvAckToStatus(back).code() != s.code()) __builtin_trap();
  }
  return 0;
}
