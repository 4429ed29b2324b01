// GgufWriter: builds a GGUF v3 file in memory (tools that write models,
// tests that need GGUF bytes).
//
// Owns copies of every metadata value and tensor payload added to it.
// Serialize() lays them out exactly as GgufFile reads them: header, metadata
// in insertion order, tensor infos in insertion order, padding to the
// alignment, then each tensor's bytes padded to the alignment. The alignment
// is 32 unless a u32 "general.alignment" that is a non-zero power of two was
// added. Adding a key that already exists replaces its value in place, so a
// written file never has duplicate keys. Not thread-safe.
#ifndef PDSERVE_COMMON_GGUF_GGUF_WRITER_H_
#define PDSERVE_COMMON_GGUF_GGUF_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/gguf/gguf_file.h"

namespace pdserve {

class GgufWriter {
 public:
  GgufWriter() = default;
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  void AddUint8(std::string_view key, uint8_t value);
  void AddInt8(std::string_view key, int8_t value);
  void AddUint16(std::string_view key, uint16_t value);
  void AddInt16(std::string_view key, int16_t value);
  void AddUint32(std::string_view key, uint32_t value);
  void AddInt32(std::string_view key, int32_t value);
  void AddUint64(std::string_view key, uint64_t value);
  void AddInt64(std::string_view key, int64_t value);
  void AddFloat32(std::string_view key, float value);
  void AddFloat64(std::string_view key, double value);
  void AddBool(std::string_view key, bool value);
  void AddString(std::string_view key, std::string_view value);
  void AddStringArray(std::string_view key, absl::Span<const std::string> values);
  void AddInt32Array(std::string_view key, absl::Span<const int32_t> values);
  void AddFloat32Array(std::string_view key, absl::Span<const float> values);

  // Adds a tensor of ggml type `type` (see ggml_type.h) with shape `dims`
  // (ne[0] first, 1 to 4 positive entries) and raw little-endian `data`.
  // INVALID_ARGUMENT when the name is empty, longer than 64 bytes or taken,
  // the type is unknown, the shape is invalid, or `data` has the wrong size.
  absl::Status AddTensor(std::string_view name, uint32_t type, const std::vector<int64_t>& dims,
                         std::string data);

  std::string Serialize() const;

  // Writes Serialize() to `path` through a temporary file and a rename, so a
  // reader never sees a half-written model.
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct Entry {
    std::string key;
    std::string encoded;  // value type (u32) followed by the value
  };
  struct Tensor {
    std::string name;
    uint32_t type = 0;
    std::vector<int64_t> dims;
    std::string data;
  };

  void Put(std::string_view key, GgufValueType type, std::string value);
  template <typename T>
  void PutScalar(std::string_view key, GgufValueType type, T value);
  template <typename T>
  void PutArray(std::string_view key, GgufValueType elem_type, absl::Span<const T> values);
  absl::Status CheckTensor(std::string_view name, uint32_t type, const std::vector<int64_t>& dims,
                           size_t data_size) const;

  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
  uint64_t alignment_ = 32;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_GGUF_GGUF_WRITER_H_
