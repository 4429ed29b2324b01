#include "common/gguf/gguf_writer.h"

#include <cstdint>
#include <string>
#include <vector>

#include "common/gguf/gguf_file.h"
#include "common/gguf/ggml_type.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kF32 = static_cast<uint32_t>(GgmlType::kF32);
constexpr uint32_t kQ4_1 = static_cast<uint32_t>(GgmlType::kQ4_1);

TEST(GgufWriterTest, EmptyWriterWritesAValidFile) {
  GgufWriter w;
  const std::string bytes = w.Serialize();
  EXPECT_EQ(bytes.size(), 32u);  // 24-byte header padded to the alignment
  auto f = GgufFile::FromBuffer(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->keys().empty());
  EXPECT_TRUE((*f)->tensors().empty());
}

TEST(GgufWriterTest, ReaddingAKeyReplacesItInPlace) {
  GgufWriter w;
  w.AddUint32("a", 1);
  w.AddString("b", "x");
  w.AddInt64("a", -5);
  auto f = GgufFile::FromBuffer(w.Serialize());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_THAT((*f)->keys(), ::testing::ElementsAre("a", "b"));
  EXPECT_EQ(*(*f)->GetInt("a"), -5);
}

TEST(GgufWriterTest, AlignmentKeyControlsPadding) {
  GgufWriter w;
  w.AddUint32("general.alignment", 128);
  ASSERT_TRUE(w.AddTensor("a", kF32, {3}, std::string(12, 'a')).ok());
  ASSERT_TRUE(w.AddTensor("b", kF32, {5}, std::string(20, 'b')).ok());
  const std::string bytes = w.Serialize();
  EXPECT_EQ(bytes.size() % 128, 0u);
  auto f = GgufFile::FromBuffer(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->alignment(), 128u);
  EXPECT_EQ((*f)->FindTensor("b")->offset, 128u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*f)->FindTensor("b")->data), 20),
            std::string(20, 'b'));
}

TEST(GgufWriterTest, ReplacedAlignmentFallsBackToDefault) {
  GgufWriter w;
  w.AddUint32("general.alignment", 64);
  w.AddUint32("general.alignment", 48);  // not a power of two: written, not used
  ASSERT_TRUE(w.AddTensor("a", kF32, {3}, std::string(12, 'a')).ok());
  EXPECT_EQ(w.Serialize().size() % 32, 0u);
  EXPECT_THAT(std::string(GgufFile::FromBuffer(w.Serialize()).status().message()),
              HasSubstr("power of two"));
}

TEST(GgufWriterTest, AddTensorRejectsInconsistentTensors) {
  GgufWriter w;
  ASSERT_TRUE(w.AddTensor("ok", kQ4_1, {64, 2}, std::string(80, '\0')).ok());
  const struct {
    std::string name;
    uint32_t type;
    std::vector<int64_t> dims;
    size_t bytes;
    const char* error;
  } cases[] = {
      {"ok", kF32, {1}, 4, "duplicate name"},
      {"", kF32, {1}, 4, "name must be"},
      {std::string(65, 'n'), kF32, {1}, 4, "name must be"},
      {"t", 4, {1}, 4, "unknown ggml type 4"},
      {"t", kF32, {}, 0, "1 to 4 dimensions"},
      {"t", kF32, {1, 1, 1, 1, 1}, 4, "1 to 4 dimensions"},
      {"t", kF32, {2, 0}, 0, "ne[1] must be positive"},
      {"t", kQ4_1, {48}, 30, "not a multiple of the block size 32"},
      {"t", kF32, {4}, 12, "data is 12 bytes, shape needs 16"},
      {"t", kF32, {int64_t{1} << 62, 4}, 4, "overflows"},
  };
  for (const auto& c : cases) {
    absl::Status s = w.AddTensor(c.name, c.type, c.dims, std::string(c.bytes, '\0'));
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.error)) << c.name.substr(0, 8);
  }
  EXPECT_EQ(GgufFile::FromBuffer(w.Serialize()).value()->tensors().size(), 1u);
}

TEST(GgufWriterTest, WriteFileReportsErrors) {
  GgufWriter w;
  absl::Status s = w.WriteFile("/nonexistent-dir/x.gguf");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
}

}  // namespace
}  // namespace pdserve
