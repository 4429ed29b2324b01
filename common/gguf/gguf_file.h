// GgufFile: a read-only, bounds-checked view of a GGUF v2/v3 file.
//
// Owns the file mapping (mmap, read-only) or an in-memory buffer. Parses the
// header, every metadata key/value and every tensor info once at Open();
// afterwards all accessors are const and the object is safe to share between
// threads. Tensor data is never copied: GgufTensorInfo::data points into the
// mapping and stays valid for the lifetime of the GgufFile.
//
// Every length, count and offset read from the file is validated against
// the file size before use; a malformed file yields an absl::Status that
// names the problem (never a crash), which the fuzz target
// tests/fuzz/gguf_fuzz.cc checks.
#ifndef PDSERVE_COMMON_GGUF_GGUF_FILE_H_
#define PDSERVE_COMMON_GGUF_GGUF_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/gguf/gguf_value.h"

namespace pdserve {

struct GgufTensorInfo {
  std::string name;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous dimension
  uint32_t type = 0;             // ggml type id, see ggml_type.h
  uint64_t offset = 0;           // relative to the data section
  int64_t nelements = 0;
  int64_t nbytes = 0;
  int64_t row_bytes = 0;  // bytes of one ne[0] row
  const uint8_t* data = nullptr;
};

class GgufFile {
 public:
  // Maps `path` read-only and parses it.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses bytes held in memory (tests, fuzzing). Takes ownership.
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBuffer(std::string bytes);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t size_bytes() const { return size_; }

  // Metadata lookups. Typed getters accept any integer type whose value fits
  // (GGUF writers are not consistent about u32 vs i32) and return
  // NOT_FOUND / INVALID_ARGUMENT naming the key otherwise.
  const GgufValue* Find(std::string_view key) const;
  absl::StatusOr<uint64_t> GetUint(std::string_view key) const;
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  absl::StatusOr<double> GetFloat(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::string_view> GetString(std::string_view key) const;
  absl::StatusOr<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  absl::StatusOr<std::vector<double>> GetFloatArray(std::string_view key) const;
  const std::vector<std::string>& keys() const { return keys_; }

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;

 private:
  class Parser;
  GgufFile() = default;
  absl::Status Parse();

  // Exactly one of mapping_/buffer_ backs `base_`.
  void* mapping_ = nullptr;
  std::string buffer_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;

  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::string> keys_;  // in file order
  absl::flat_hash_map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_GGUF_GGUF_FILE_H_
