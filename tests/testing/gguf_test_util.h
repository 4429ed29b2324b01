// Helpers shared by the GGUF unit tests: hand-assembled GGUF bytes (for
// files GgufWriter refuses to write) and error-message expectations.
#ifndef PDSERVE_TESTS_TESTING_GGUF_TEST_UTIL_H_
#define PDSERVE_TESTS_TESTING_GGUF_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/gguf/gguf_file.h"
#include "common/gguf/ggml_type.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdserve::gguf_test {

constexpr uint32_t kF32 = static_cast<uint32_t>(GgmlType::kF32);
constexpr uint32_t kF16 = static_cast<uint32_t>(GgmlType::kF16);
constexpr uint32_t kQ4_1 = static_cast<uint32_t>(GgmlType::kQ4_1);
constexpr uint32_t kQ8_0 = static_cast<uint32_t>(GgmlType::kQ8_0);
constexpr uint32_t kQ4_K = static_cast<uint32_t>(GgmlType::kQ4_K);

// Hand-assembled GGUF bytes, for files GgufWriter refuses to produce.
struct Bytes {
  std::string s;
  Bytes& Raw(std::string_view v) {
    s.append(v.data(), v.size());
    return *this;
  }
  template <typename T>
  Bytes& Le(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    s.append(b, sizeof(T));
    return *this;
  }
  Bytes& U32(uint32_t v) { return Le(v); }
  Bytes& U64(uint64_t v) { return Le(v); }
  Bytes& Str(std::string_view v) { return U64(v.size()).Raw(v); }
  Bytes& PadTo(size_t a) {
    s.append((a - s.size() % a) % a, '\0');
    return *this;
  }
};

inline Bytes Header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
  Bytes b;
  b.Raw("GGUF").U32(version).U64(tensors).U64(kvs);
  return b;
}

inline Bytes& TensorInfo(Bytes& b, std::string_view name, std::vector<uint64_t> dims, uint32_t type,
                         uint64_t offset) {
  b.Str(name).U32(static_cast<uint32_t>(dims.size()));
  for (uint64_t d : dims) b.U64(d);
  return b.U32(type).U64(offset);
}

// A file with no metadata and one tensor whose data section holds `data_bytes`.
inline std::string OneTensor(std::vector<uint64_t> dims, uint32_t type, uint64_t offset,
                             size_t data_bytes, std::string_view name = "w") {
  Bytes b = Header(1, 0);
  TensorInfo(b, name, std::move(dims), type, offset).PadTo(32);
  b.s.append(data_bytes, '\x5a');
  return b.s;
}

inline std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 31 + seed);
  return s;
}

inline absl::Status ParseStatus(std::string bytes) {
  return GgufFile::FromBuffer(std::move(bytes)).status();
}

inline void ExpectError(std::string bytes, absl::StatusCode code, std::string_view substr) {
  absl::Status s = ParseStatus(std::move(bytes));
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(std::string(substr)));
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("gguf: "));
}

inline void ExpectInvalid(std::string bytes, std::string_view substr) {
  ExpectError(std::move(bytes), absl::StatusCode::kInvalidArgument, substr);
}

}  // namespace pdserve::gguf_test

#endif  // PDSERVE_TESTS_TESTING_GGUF_TEST_UTIL_H_
