// GgufFile::Parser: the one-pass, bounds-checked decoder behind
// GgufFile::Open/FromBuffer. Internal to common/gguf_*.cc; include
// gguf_file.h instead.
//
// A Parser fills the GgufFile it is given (keys, values, alignment, tensor
// infos with data pointers) and is used once, on one thread, before the file
// is published. Errors describe what and where without the "gguf: " prefix,
// which GgufFile::Parse adds.
#ifndef PDSERVE_COMMON_GGUF_GGUF_PARSER_H_
#define PDSERVE_COMMON_GGUF_GGUF_PARSER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/gguf/gguf_file.h"

namespace pdserve {

// Keys and names come from the file: escape them and cap their length so an
// error message stays printable and short. Returns the text in single quotes.
std::string QuoteGgufName(std::string_view s);

// One pass over the bytes with a bounds-checked cursor. Every Read* checks
// the bytes it needs against what is left before touching them.
class GgufFile::Parser {
 public:
  explicit Parser(GgufFile* file) : f_(file) {}
  absl::Status Run();

 private:
  uint64_t Left() const { return f_->size_ - pos_; }
  const uint8_t* Here() const { return f_->base_ + pos_; }
  absl::Status Need(uint64_t n, absl::string_view what) const;
  absl::Status CheckCount(uint64_t count, uint64_t min_bytes, absl::string_view what) const;
  template <typename T>
  absl::Status Read(T* out, absl::string_view what);
  absl::Status ReadString(uint64_t max_len, absl::string_view what, std::string_view* out);

  absl::Status ReadHeader(uint64_t* tensor_count, uint64_t* kv_count);
  absl::Status CheckVersion(uint32_t version) const;
  absl::Status ReadKv(uint64_t index);
  absl::Status ReadValue(uint32_t raw_type, GgufValue* out);
  absl::Status ReadArray(GgufValue* out);
  absl::Status ReadStringArray(GgufValue* out);
  absl::Status ResolveAlignment();
  absl::Status ReadTensorInfo(uint64_t index);
  absl::Status ReadTensorBody(GgufTensorInfo* t);
  absl::Status SizeTensor(GgufTensorInfo* t) const;
  absl::Status PlaceTensors();
  absl::Status CheckNoOverlap() const;

  GgufFile* f_;
  uint64_t pos_ = 0;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_GGUF_GGUF_PARSER_H_
