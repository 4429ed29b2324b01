// KV frame codec: the length-prefixed framing of the TCP KV data plane and
// the checks a frame header must pass before any payload byte is read
// (docs/protocol/kv-wire.md, "Wire format", "Validation (receiver)"). Pure functions; no I/O.
#ifndef PDSERVE_COMMON_KV_KV_FRAME_H_
#define PDSERVE_COMMON_KV_KV_FRAME_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "pdserve/v1/kv_frame.pb.h"

namespace pdserve {

// The u32 in front of every header and ack.
inline constexpr size_t kKvLengthPrefixBytes = 4;
// Headers and acks are small; anything larger is a broken or hostile peer.
inline constexpr uint32_t kMaxKvMessageBytes = 64 * 1024;

// [u32 little-endian length][message bytes].
std::string EncodeKvMessage(const google::protobuf::MessageLite& message);

uint32_t DecodeKvLength(const uint8_t prefix[kKvLengthPrefixBytes]);

// INVALID_ARGUMENT unless 0 < length <= kMaxKvMessageBytes.
absl::Status CheckKvMessageLength(uint32_t length);

// Checks that need no reservation: a known kind and payload path, payload
// only on LAYER_BLOCKS, payload_bytes == len(block_indices) *
// bytes_per_layer_block with at most `max_blocks` blocks (and as many
// src_blocks on CUDA IPC frames), a handle on ATTACH. After this the
// payload size is bounded, so even an unwanted frame can be skipped safely.
absl::Status CheckKvFrameShape(const v1::KvFrameHeader& header, int64_t bytes_per_layer_block,
                               int64_t max_blocks);

// Payload bytes that follow the header on the connection: payload_bytes
// for PAYLOAD_INLINE frames, 0 for CUDA IPC frames (pulled by the receiver).
uint64_t KvWirePayloadBytes(const v1::KvFrameHeader& header);

v1::KvAck MakeKvAck(uint64_t transfer_id, uint64_t epoch, const absl::Status& status);

// OK for a positive ack, else the receiver's code and message.
absl::Status KvAckToStatus(const v1::KvAck& ack);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_FRAME_H_
