#include "common/kv/kv_frame.h"

#include "absl/strings/str_cat.h"

namespace pdserve {

std::string EncodeKvMessage(const google::protobuf::MessageLite& message) {
  const size_t size = message.ByteSizeLong();
  std::string out(kKvLengthPrefixBytes + size, '\0');
  for (size_t i = 0; i < kKvLengthPrefixBytes; ++i) {
    out[i] = static_cast<char>((size >> (8 * i)) & 0xff);
  }
  message.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data()) +
                                          kKvLengthPrefixBytes);
  return out;
}

uint32_t DecodeKvLength(const uint8_t prefix[kKvLengthPrefixBytes]) {
  uint32_t length = 0;
  for (size_t i = 0; i < kKvLengthPrefixBytes; ++i) {
    length |= static_cast<uint32_t>(prefix[i]) << (8 * i);
  }
  return length;
}

absl::Status CheckKvMessageLength(uint32_t length) {
  if (length == 0 || length > kMaxKvMessageBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv frame: message length ", length, " not in [1, ", kMaxKvMessageBytes, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckKvFrameShape(const v1::KvFrameHeader& header, int64_t bytes_per_layer_block,
                               int64_t max_blocks) {
  const uint64_t payload = header.payload_bytes();
  switch (header.kind()) {
    case v1::KvFrameHeader::LAYER_BLOCKS:
      break;
    case v1::KvFrameHeader::ATTACH:
      if (header.ipc_handle().empty()) {
        return absl::InvalidArgumentError("kv frame: ATTACH without an ipc_handle");
      }
      [[fallthrough]];
    case v1::KvFrameHeader::NCCL_HELLO:
      if (header.kind() == v1::KvFrameHeader::NCCL_HELLO && header.nccl_id().empty()) {
        return absl::InvalidArgumentError("kv frame: NCCL_HELLO without an nccl_id");
      }
      [[fallthrough]];
    case v1::KvFrameHeader::COMMIT:
    case v1::KvFrameHeader::ABORT:
    case v1::KvFrameHeader::PROGRESS:
      if (payload != 0 || header.block_indices_size() != 0 || header.src_blocks_size() != 0 ||
          header.payload_path() != v1::KvFrameHeader::PAYLOAD_INLINE) {
        return absl::InvalidArgumentError(absl::StrCat(
            "kv frame: ", v1::KvFrameHeader::Kind_Name(header.kind()), " carries a payload"));
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("kv frame: unknown kind ", static_cast<int>(header.kind())));
  }
  const int64_t blocks = header.block_indices_size();
  if (blocks == 0 || blocks > max_blocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv frame: ", blocks, " blocks, expected 1..", max_blocks));
  }
  if (header.payload_path() == v1::KvFrameHeader::PAYLOAD_CUDA_IPC &&
      header.src_blocks_size() != blocks) {
    return absl::InvalidArgumentError(absl::StrCat("kv frame: ", header.src_blocks_size(),
                                                   " source blocks for ", blocks, " blocks"));
  }
  if (header.payload_path() != v1::KvFrameHeader::PAYLOAD_INLINE &&
      header.payload_path() != v1::KvFrameHeader::PAYLOAD_CUDA_IPC &&
      header.payload_path() != v1::KvFrameHeader::PAYLOAD_NCCL) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv frame: unknown payload path ", static_cast<int>(header.payload_path())));
  }
  if (payload != static_cast<uint64_t>(blocks * bytes_per_layer_block)) {
    return absl::InvalidArgumentError(absl::StrCat("kv frame: payload of ", payload, " bytes for ",
                                                   blocks, " blocks of ", bytes_per_layer_block,
                                                   " bytes"));
  }
  return absl::OkStatus();
}

uint64_t KvWirePayloadBytes(const v1::KvFrameHeader& header) {
  return header.payload_path() == v1::KvFrameHeader::PAYLOAD_INLINE ? header.payload_bytes() : 0;
}

v1::KvAck MakeKvAck(uint64_t transfer_id, uint64_t epoch, const absl::Status& status) {
  v1::KvAck ack;
  ack.set_transfer_id(transfer_id);
  ack.set_epoch(epoch);
  ack.set_ok(status.ok());
  if (!status.ok()) {
    ack.set_status_code(static_cast<int32_t>(status.code()));
    ack.set_error(std::string(status.message()));
  }
  return ack;
}

absl::Status KvAckToStatus(const v1::KvAck& ack) {
  if (ack.ok()) return absl::OkStatus();
  auto code = static_cast<absl::StatusCode>(ack.status_code());
  // An ack that says "not ok" with no usable code still must not read as OK.
  if (code == absl::StatusCode::kOk || ack.status_code() < 0 || ack.status_code() > 16) {
    code = absl::StatusCode::kUnknown;
  }
  return absl::Status(code, absl::StrCat("kv receiver: ", ack.error()));
}

}  // namespace pdserve
