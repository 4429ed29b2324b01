#include "common/rpc/raw_message.h"

#include "absl/strings/str_cat.h"

namespace pdserve {

absl::Status MalformedRequestError(const std::string& type_name, size_t body_bytes,
                                   const std::string& peer) {
  LOG(WARNING) << "refusing a malformed request from " << peer << ": " << body_bytes
               << " bytes that do not parse as " << type_name;
  return absl::InvalidArgumentError(
      absl::StrCat("the request body (", body_bytes, " bytes) is not a valid ", type_name,
                   ": not protobuf wire format, wrong field types, or a string field that is "
                   "not valid UTF-8 (send token ids for arbitrary bytes)"));
}

}  // namespace pdserve
