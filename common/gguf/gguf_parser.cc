#include "common/gguf/gguf_parser.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/gguf/gguf_value.h"
#include "common/gguf/ggml_type.h"

namespace pdserve {

// Scalars are memcpy'd straight out of the file, which is little-endian.
static_assert(std::endian::native == std::endian::little,
              "GGUF decoding needs a little-endian host");

namespace {

constexpr char kMagic[] = "GGUF";
constexpr char kAlignmentKey[] = "general.alignment";
constexpr uint64_t kMaxKeyBytes = 65535;      // llama.cpp's limit
constexpr uint64_t kMaxTensorNameBytes = 64;  // GGML_MAX_NAME
constexpr uint64_t kMaxDims = 4;              // GGML_MAX_DIMS
// Smallest possible encodings; a count that cannot fit in the bytes left at
// these sizes is rejected before anything is sized by it.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;              // key len, key, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name len, n_dims, ne0, type, offset

absl::Status WithContext(const absl::Status& s, absl::string_view where) {
  return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
}

std::string Shape(const GgufTensorInfo& t) {
  return absl::StrCat("{", absl::StrJoin(t.ne, t.ne + t.n_dims, ", "), "}");
}

}  // namespace

std::string QuoteGgufName(std::string_view s) {
  constexpr size_t kMaxShown = 96;
  const absl::string_view shown(s.data(), std::min(s.size(), kMaxShown));
  return absl::StrCat("'", absl::CHexEscape(shown), s.size() > kMaxShown ? "...'" : "'");
}

absl::Status GgufFile::Parser::Run() {
  uint64_t tensor_count = 0;
  uint64_t kv_count = 0;
  RETURN_IF_ERROR(ReadHeader(&tensor_count, &kv_count));
  for (uint64_t i = 0; i < kv_count; ++i) RETURN_IF_ERROR(ReadKv(i));
  RETURN_IF_ERROR(ResolveAlignment());
  for (uint64_t i = 0; i < tensor_count; ++i) RETURN_IF_ERROR(ReadTensorInfo(i));
  RETURN_IF_ERROR(PlaceTensors());
  return CheckNoOverlap();
}

absl::Status GgufFile::Parser::Need(uint64_t n, absl::string_view what) const {
  if (n <= Left()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("truncated ", what, " at byte offset ", pos_,
                                                 ": need ", n, " bytes, ", Left(),
                                                 " left (file size ", f_->size_, ")"));
}

absl::Status GgufFile::Parser::CheckCount(uint64_t count, uint64_t min_bytes,
                                          absl::string_view what) const {
  if (count <= Left() / min_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " count ", count, " (at least ", min_bytes,
                                                 " bytes each) cannot fit in the ", Left(),
                                                 " bytes left after byte offset ", pos_));
}

template <typename T>
absl::Status GgufFile::Parser::Read(T* out, absl::string_view what) {
  RETURN_IF_ERROR(Need(sizeof(T), what));
  std::memcpy(out, Here(), sizeof(T));
  pos_ += sizeof(T);
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::ReadString(uint64_t max_len, absl::string_view what,
                                          std::string_view* out) {
  uint64_t len = 0;
  RETURN_IF_ERROR(Read(&len, what));
  if (len > max_len) {
    return absl::InvalidArgumentError(absl::StrCat(what, " length ", len, " at byte offset ",
                                                   pos_ - 8, " exceeds the limit of ", max_len));
  }
  if (len > Left()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " length ", len, " at byte offset ",
                                                   pos_ - 8, " runs past the end of the file (",
                                                   Left(), " bytes left)"));
  }
  *out = std::string_view(reinterpret_cast<const char*>(Here()), len);
  pos_ += len;
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::ReadHeader(uint64_t* tensor_count, uint64_t* kv_count) {
  RETURN_IF_ERROR(Need(4, "magic"));
  const absl::string_view magic(reinterpret_cast<const char*>(Here()), 4);
  if (magic != absl::string_view(kMagic, 4)) {
    return absl::InvalidArgumentError(absl::StrCat("bad magic \"", absl::CHexEscape(magic),
                                                   "\" at byte offset 0, want \"GGUF\""));
  }
  pos_ = 4;
  RETURN_IF_ERROR(Read(&f_->version_, "version"));
  RETURN_IF_ERROR(CheckVersion(f_->version_));
  RETURN_IF_ERROR(Read(tensor_count, "tensor count"));
  RETURN_IF_ERROR(Read(kv_count, "kv count"));
  RETURN_IF_ERROR(CheckCount(*tensor_count, kMinTensorInfoBytes, "tensor"));
  return CheckCount(*kv_count, kMinKvBytes, "kv");
}

absl::Status GgufFile::Parser::CheckVersion(uint32_t version) const {
  if (version == 2 || version == 3) return absl::OkStatus();
  const uint32_t swapped = __builtin_bswap32(version);
  if (swapped == 2 || swapped == 3) {
    return absl::UnimplementedError(
        absl::StrCat("big-endian GGUF v", swapped, " is not supported"));
  }
  if (version == 0) return absl::InvalidArgumentError("invalid GGUF version 0");
  return absl::UnimplementedError(
      absl::StrCat("GGUF version ", version, " is not supported (want 2 or 3)"));
}

absl::Status GgufFile::Parser::ReadKv(uint64_t index) {
  const uint64_t start = pos_;
  std::string_view key;
  absl::Status s = ReadString(kMaxKeyBytes, "key", &key);
  if (s.ok() && key.empty()) s = absl::InvalidArgumentError("empty key");
  if (!s.ok()) return WithContext(s, absl::StrCat("kv #", index, " at byte offset ", start));
  if (f_->kv_.contains(absl::string_view(key.data(), key.size()))) {
    return absl::InvalidArgumentError(absl::StrCat("duplicate key ", QuoteGgufName(key), " (kv #",
                                                   index, " at byte offset ", start, ")"));
  }
  uint32_t raw_type = 0;
  GgufValue value;
  s = Read(&raw_type, "value type");
  if (s.ok()) s = ReadValue(raw_type, &value);
  if (!s.ok()) return WithContext(s, absl::StrCat("key ", QuoteGgufName(key)));
  f_->keys_.emplace_back(key);
  f_->kv_.emplace(key, std::move(value));
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::ReadValue(uint32_t raw_type, GgufValue* out) {
  if (raw_type > static_cast<uint32_t>(GgufValueType::kF64)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown value type ", raw_type, " at byte offset ", pos_ - 4));
  }
  out->type = static_cast<GgufValueType>(raw_type);
  if (out->type == GgufValueType::kArray) return ReadArray(out);
  if (out->type == GgufValueType::kString) {
    return ReadString(std::numeric_limits<uint64_t>::max(), "string", &out->str);
  }
  const uint64_t size = GgufScalarSize(out->type);
  RETURN_IF_ERROR(Need(size, GgufValueTypeName(out->type)));
  DecodeGgufScalar(out->type, Here(), out);
  pos_ += size;
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::ReadArray(GgufValue* out) {
  uint32_t raw_elem = 0;
  RETURN_IF_ERROR(Read(&raw_elem, "array element type"));
  if (raw_elem == static_cast<uint32_t>(GgufValueType::kArray)) {
    return absl::InvalidArgumentError(
        absl::StrCat("nested array at byte offset ", pos_ - 4, " is not supported"));
  }
  if (raw_elem > static_cast<uint32_t>(GgufValueType::kF64)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown array element type ", raw_elem, " at byte offset ", pos_ - 4));
  }
  out->elem_type = static_cast<GgufValueType>(raw_elem);
  RETURN_IF_ERROR(Read(&out->count, "array length"));
  if (out->elem_type == GgufValueType::kString) return ReadStringArray(out);
  const uint64_t size = GgufScalarSize(out->elem_type);
  RETURN_IF_ERROR(CheckCount(out->count, size, "array element"));
  out->array_data = Here();
  pos_ += out->count * size;
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::ReadStringArray(GgufValue* out) {
  RETURN_IF_ERROR(CheckCount(out->count, 8, "string array element"));
  out->array_data = Here();
  out->strings.reserve(out->count);
  for (uint64_t i = 0; i < out->count; ++i) {
    std::string_view s;
    absl::Status st = ReadString(std::numeric_limits<uint64_t>::max(), "string", &s);
    if (!st.ok()) return WithContext(st, absl::StrCat("array element #", i));
    out->strings.push_back(s);
  }
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::ResolveAlignment() {
  const GgufValue* v = f_->Find(kAlignmentKey);
  if (v == nullptr) return absl::OkStatus();
  if (v->type != GgufValueType::kU32) {
    return absl::InvalidArgumentError(absl::StrCat("key '", kAlignmentKey, "' has type ",
                                                   GgufValueTypeName(v->type), ", want u32"));
  }
  if (!std::has_single_bit(v->u)) {
    return absl::InvalidArgumentError(
        absl::StrCat("key '", kAlignmentKey, "' = ", v->u, " is not a non-zero power of two"));
  }
  f_->alignment_ = v->u;
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::ReadTensorInfo(uint64_t index) {
  const uint64_t start = pos_;
  std::string_view name;
  absl::Status s = ReadString(kMaxTensorNameBytes, "tensor name", &name);
  if (!s.ok()) return WithContext(s, absl::StrCat("tensor #", index, " at byte offset ", start));
  GgufTensorInfo t;
  t.name = std::string(name);
  s = ReadTensorBody(&t);
  if (!s.ok()) return WithContext(s, absl::StrCat("tensor ", QuoteGgufName(name)));
  if (!f_->tensor_index_.emplace(t.name, f_->tensors_.size()).second) {
    return absl::InvalidArgumentError(absl::StrCat("duplicate tensor ", QuoteGgufName(name),
                                                   " (tensor #", index, " at byte offset ", start,
                                                   ")"));
  }
  f_->tensors_.push_back(std::move(t));
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::ReadTensorBody(GgufTensorInfo* t) {
  uint32_t n_dims = 0;
  RETURN_IF_ERROR(Read(&n_dims, "n_dims"));
  if (n_dims < 1 || n_dims > kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat("n_dims ", n_dims, " at byte offset ", pos_ - 4,
                                                   " is outside [1, ", kMaxDims, "]"));
  }
  t->n_dims = static_cast<int>(n_dims);
  for (int d = 0; d < t->n_dims; ++d) {
    uint64_t ne = 0;
    RETURN_IF_ERROR(Read(&ne, "dimension"));
    if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(absl::StrCat("ne[", d, "] = ", ne, " at byte offset ",
                                                     pos_ - 8, " must be in [1, 2^63)"));
    }
    t->ne[d] = static_cast<int64_t>(ne);
  }
  RETURN_IF_ERROR(Read(&t->type, "ggml type"));
  if (FindGgmlTypeTraits(t->type) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown ggml type ", t->type, " at byte offset ", pos_ - 4));
  }
  RETURN_IF_ERROR(Read(&t->offset, "data offset"));
  if (t->offset % f_->alignment_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat("data offset ", t->offset, " at byte offset ",
                                                   pos_ - 8, " is not a multiple of the alignment ",
                                                   f_->alignment_));
  }
  return SizeTensor(t);
}

// Every product below is overflow-checked or bounded by the file size first,
// so a hostile shape cannot wrap into a small, plausible byte count.
absl::Status GgufFile::Parser::SizeTensor(GgufTensorInfo* t) const {
  const GgmlTypeTraits& traits = *FindGgmlTypeTraits(t->type);
  const std::string type_name = GgmlTypeName(t->type);
  int64_t nelements = 1;
  for (int64_t ne : t->ne) {
    if (__builtin_mul_overflow(nelements, ne, &nelements)) {
      return absl::InvalidArgumentError(
          absl::StrCat("element count of shape ", Shape(*t), " overflows int64"));
    }
  }
  if (t->ne[0] % traits.block_elems != 0) {
    return absl::InvalidArgumentError(absl::StrCat("ne[0] = ", t->ne[0],
                                                   " is not a multiple of the ", type_name,
                                                   " block size ", traits.block_elems));
  }
  const uint64_t size = f_->size_;
  const uint64_t blocks = static_cast<uint64_t>(t->ne[0] / traits.block_elems);
  const uint64_t rows = static_cast<uint64_t>(nelements / t->ne[0]);
  const uint64_t block_bytes = static_cast<uint64_t>(traits.block_bytes);
  if (blocks > size / block_bytes || rows > size / (blocks * block_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(type_name, " data of shape ", Shape(*t),
                                                   " is larger than the file size ", size));
  }
  t->nelements = nelements;
  t->row_bytes = static_cast<int64_t>(blocks * block_bytes);
  t->nbytes = t->row_bytes * static_cast<int64_t>(rows);
  return absl::OkStatus();
}

absl::Status GgufFile::Parser::PlaceTensors() {
  // pos_ <= size_ and the alignment is at most 2^31, so this cannot wrap.
  const uint64_t data_offset = (pos_ + f_->alignment_ - 1) / f_->alignment_ * f_->alignment_;
  for (GgufTensorInfo& t : f_->tensors_) {
    uint64_t begin = 0;
    uint64_t end = 0;
    if (__builtin_add_overflow(data_offset, t.offset, &begin) ||
        __builtin_add_overflow(begin, static_cast<uint64_t>(t.nbytes), &end)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", QuoteGgufName(t.name), " data offset ", t.offset, " overflows"));
    }
    if (end > f_->size_) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", QuoteGgufName(t.name), " data [",
                                                     begin, ", ", end, ") exceeds file size ",
                                                     f_->size_));
    }
    t.data = f_->base_ + begin;
  }
  return absl::OkStatus();
}

// Overlapping tensors would let a writer through one alias corrupt another;
// no real writer produces them, so treat them as corruption.
absl::Status GgufFile::Parser::CheckNoOverlap() const {
  const std::vector<GgufTensorInfo>& ts = f_->tensors_;
  std::vector<size_t> order(ts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&ts](size_t a, size_t b) { return ts[a].offset < ts[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensorInfo& prev = ts[order[i - 1]];
    const GgufTensorInfo& cur = ts[order[i]];
    if (prev.offset + static_cast<uint64_t>(prev.nbytes) > cur.offset) {
      return absl::InvalidArgumentError(absl::StrCat("tensors ", QuoteGgufName(prev.name), " and ",
                                                     QuoteGgufName(cur.name),
                                                     " overlap in the data section"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pdserve
