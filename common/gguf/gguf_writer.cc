#include "common/gguf/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/gguf/ggml_type.h"

namespace pdserve {
namespace {

constexpr std::string_view kAlignmentKey = "general.alignment";
constexpr uint32_t kVersion = 3;
constexpr size_t kMaxTensorNameBytes = 64;

// GGUF is little-endian; so is every host this project builds for.
static_assert(std::endian::native == std::endian::little, "GgufWriter needs a little-endian host");

template <typename T>
void AppendLe(std::string* out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out->append(bytes, sizeof(T));
}

void AppendString(std::string* out, std::string_view s) {
  AppendLe<uint64_t>(out, s.size());
  out->append(s.data(), s.size());
}

uint64_t AlignUp(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

void PadTo(std::string* out, uint64_t alignment) {
  out->append(AlignUp(out->size(), alignment) - out->size(), '\0');
}

std::string Type(GgufValueType type) {
  std::string out;
  AppendLe<uint32_t>(&out, static_cast<uint32_t>(type));
  return out;
}

absl::Status TensorError(std::string_view name, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      "gguf writer: tensor '", absl::string_view(name.data(), name.size()), "': ", what));
}

}  // namespace

void GgufWriter::Put(std::string_view key, GgufValueType type, std::string value) {
  std::string encoded = Type(type) + value;
  // A replaced alignment falls back to the default until AddUint32 sets it.
  if (key == kAlignmentKey) alignment_ = 32;
  for (Entry& e : entries_) {
    if (e.key == key) {
      e.encoded = std::move(encoded);
      return;
    }
  }
  entries_.push_back(Entry{std::string(key), std::move(encoded)});
}

template <typename T>
void GgufWriter::PutScalar(std::string_view key, GgufValueType type, T value) {
  std::string bytes;
  AppendLe<T>(&bytes, value);
  Put(key, type, std::move(bytes));
}

template <typename T>
void GgufWriter::PutArray(std::string_view key, GgufValueType elem_type,
                          absl::Span<const T> values) {
  std::string bytes = Type(elem_type);
  AppendLe<uint64_t>(&bytes, values.size());
  for (const T& v : values) AppendLe<T>(&bytes, v);
  Put(key, GgufValueType::kArray, std::move(bytes));
}

void GgufWriter::AddUint8(std::string_view key, uint8_t v) {
  PutScalar(key, GgufValueType::kU8, v);
}
void GgufWriter::AddInt8(std::string_view key, int8_t v) { PutScalar(key, GgufValueType::kI8, v); }
void GgufWriter::AddUint16(std::string_view key, uint16_t v) {
  PutScalar(key, GgufValueType::kU16, v);
}
void GgufWriter::AddInt16(std::string_view key, int16_t v) {
  PutScalar(key, GgufValueType::kI16, v);
}
void GgufWriter::AddInt32(std::string_view key, int32_t v) {
  PutScalar(key, GgufValueType::kI32, v);
}
void GgufWriter::AddUint64(std::string_view key, uint64_t v) {
  PutScalar(key, GgufValueType::kU64, v);
}
void GgufWriter::AddInt64(std::string_view key, int64_t v) {
  PutScalar(key, GgufValueType::kI64, v);
}
void GgufWriter::AddFloat32(std::string_view key, float v) {
  PutScalar(key, GgufValueType::kF32, v);
}
void GgufWriter::AddFloat64(std::string_view key, double v) {
  PutScalar(key, GgufValueType::kF64, v);
}
void GgufWriter::AddBool(std::string_view key, bool v) {
  PutScalar<uint8_t>(key, GgufValueType::kBool, v ? 1 : 0);
}

void GgufWriter::AddUint32(std::string_view key, uint32_t v) {
  PutScalar(key, GgufValueType::kU32, v);
  if (key == kAlignmentKey && std::has_single_bit(v)) alignment_ = v;
}

void GgufWriter::AddString(std::string_view key, std::string_view value) {
  std::string bytes;
  AppendString(&bytes, value);
  Put(key, GgufValueType::kString, std::move(bytes));
}

void GgufWriter::AddStringArray(std::string_view key, absl::Span<const std::string> values) {
  std::string bytes = Type(GgufValueType::kString);
  AppendLe<uint64_t>(&bytes, values.size());
  for (const std::string& v : values) AppendString(&bytes, v);
  Put(key, GgufValueType::kArray, std::move(bytes));
}

void GgufWriter::AddInt32Array(std::string_view key, absl::Span<const int32_t> values) {
  PutArray(key, GgufValueType::kI32, values);
}

void GgufWriter::AddFloat32Array(std::string_view key, absl::Span<const float> values) {
  PutArray(key, GgufValueType::kF32, values);
}

absl::Status GgufWriter::CheckTensor(std::string_view name, uint32_t type,
                                     const std::vector<int64_t>& dims, size_t data_size) const {
  if (name.empty() || name.size() > kMaxTensorNameBytes) {
    return TensorError(name, "name must be 1 to 64 bytes");
  }
  for (const Tensor& t : tensors_) {
    if (t.name == name) return TensorError(name, "duplicate name");
  }
  const GgmlTypeTraits* traits = FindGgmlTypeTraits(type);
  if (traits == nullptr) return TensorError(name, absl::StrCat("unknown ggml type ", type));
  if (dims.empty() || dims.size() > 4) return TensorError(name, "needs 1 to 4 dimensions");
  int64_t rows = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] <= 0) return TensorError(name, absl::StrCat("ne[", d, "] must be positive"));
    if (d > 0 && __builtin_mul_overflow(rows, dims[d], &rows)) {
      return TensorError(name, "element count overflows");
    }
  }
  if (dims[0] % traits->block_elems != 0) {
    return TensorError(name, absl::StrCat("ne[0] = ", dims[0], " is not a multiple of the block ",
                                          "size ", traits->block_elems));
  }
  int64_t nbytes = 0;
  if (__builtin_mul_overflow(dims[0] / traits->block_elems, traits->block_bytes, &nbytes) ||
      __builtin_mul_overflow(nbytes, rows, &nbytes)) {
    return TensorError(name, "byte size overflows");
  }
  if (static_cast<uint64_t>(nbytes) != data_size) {
    return TensorError(name, absl::StrCat("data is ", data_size, " bytes, shape needs ", nbytes));
  }
  return absl::OkStatus();
}

absl::Status GgufWriter::AddTensor(std::string_view name, uint32_t type,
                                   const std::vector<int64_t>& dims, std::string data) {
  if (absl::Status s = CheckTensor(name, type, dims, data.size()); !s.ok()) return s;
  tensors_.push_back(Tensor{std::string(name), type, dims, std::move(data)});
  return absl::OkStatus();
}

std::string GgufWriter::Serialize() const {
  std::string out("GGUF");
  AppendLe<uint32_t>(&out, kVersion);
  AppendLe<uint64_t>(&out, tensors_.size());
  AppendLe<uint64_t>(&out, entries_.size());
  for (const Entry& e : entries_) {
    AppendString(&out, e.key);
    out += e.encoded;
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    AppendString(&out, t.name);
    AppendLe<uint32_t>(&out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t ne : t.dims) AppendLe<uint64_t>(&out, static_cast<uint64_t>(ne));
    AppendLe<uint32_t>(&out, t.type);
    AppendLe<uint64_t>(&out, offset);
    offset += AlignUp(t.data.size(), alignment_);
  }
  // The data section starts aligned, so aligning the absolute position after
  // each tensor is the same as aligning its offset within the section.
  PadTo(&out, alignment_);
  for (const Tensor& t : tensors_) {
    out += t.data;
    PadTo(&out, alignment_);
  }
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  const std::string bytes = Serialize();
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("gguf writer: open ", tmp));
  const char* failed = nullptr;
  if (std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) failed = "write";
  int err = errno;
  if (std::fclose(f) != 0 && failed == nullptr) {
    failed = "close";
    err = errno;
  }
  if (failed == nullptr && std::rename(tmp.c_str(), path.c_str()) != 0) {
    failed = "rename";
    err = errno;
  }
  if (failed == nullptr) return absl::OkStatus();
  std::remove(tmp.c_str());
  return absl::ErrnoToStatus(err, absl::StrCat("gguf writer: ", failed, " ", tmp));
}

}  // namespace pdserve
