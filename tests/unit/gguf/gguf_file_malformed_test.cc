// Malformed GGUF files: each must fail with a status whose message names
// what is wrong and where, never crash or read out of bounds.
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_test_util.h"

namespace pdserve {
namespace {

using ::pdserve::gguf_test::Bytes;
using ::pdserve::gguf_test::ExpectError;
using ::pdserve::gguf_test::ExpectInvalid;
using ::pdserve::gguf_test::Header;
using ::pdserve::gguf_test::kF32;
using ::pdserve::gguf_test::kQ4_1;
using ::pdserve::gguf_test::OneTensor;
using ::pdserve::gguf_test::ParseStatus;
using ::pdserve::gguf_test::Pattern;
using ::pdserve::gguf_test::TensorInfo;
using ::testing::HasSubstr;

TEST(GgufFileMalformedTest, EmptyBuffer) { ExpectInvalid("", "truncated magic at byte offset 0"); }

TEST(GgufFileMalformedTest, BadMagic) {
  Bytes b = Header(0, 0);
  b.s[3] = 'X';
  ExpectInvalid(b.s, "bad magic \"GGUX\"");
}

TEST(GgufFileMalformedTest, BadVersion) {
  ExpectError(Header(0, 0, 1).s, absl::StatusCode::kUnimplemented, "GGUF version 1");
  ExpectError(Header(0, 0, 4).s, absl::StatusCode::kUnimplemented, "GGUF version 4");
  ExpectError(Header(0, 0, 0x03000000).s, absl::StatusCode::kUnimplemented, "big-endian");
  ExpectInvalid(Header(0, 0, 0).s, "version 0");
}

// One string KV, one F32 tensor; cut inside each region in turn.
class GgufFileTruncationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GgufWriter w;
    w.AddString("general.name", std::string(100, 'n'));
    ASSERT_TRUE(w.AddTensor("w.f32", kF32, {4, 2}, Pattern(32, 0)).ok());
    bytes_ = w.Serialize();
    tensor_info_ = bytes_.find("w.f32") - 8;
    data_ = bytes_.size() - 32;
    ASSERT_TRUE(ParseStatus(bytes_).ok());
  }
  std::string Cut(size_t n) const { return bytes_.substr(0, n); }
  std::string bytes_;
  size_t tensor_info_ = 0;
  size_t data_ = 0;
};

TEST_F(GgufFileTruncationTest, InHeader) {
  ExpectInvalid(Cut(6), "truncated version at byte offset 4");
  ExpectInvalid(Cut(20), "truncated kv count at byte offset 16");
}

TEST_F(GgufFileTruncationTest, InKv) {
  ExpectInvalid(Cut(24 + 8 + 12 + 4 + 8 + 50),
                "key 'general.name': string length 100 at byte offset 48 runs past the end");
}

TEST_F(GgufFileTruncationTest, InTensorInfo) {
  ExpectInvalid(Cut(tensor_info_ + 8 + 5 + 4 + 12), "tensor 'w.f32': truncated dimension");
}

TEST_F(GgufFileTruncationTest, InData) {
  ExpectInvalid(Cut(data_ + 16), absl::StrCat("tensor 'w.f32' data [", data_, ", ", data_ + 32,
                                              ") exceeds file size ", data_ + 16));
}

TEST_F(GgufFileTruncationTest, EveryPrefixFails) {
  for (size_t n = 0; n < bytes_.size(); ++n) EXPECT_FALSE(ParseStatus(Cut(n)).ok()) << n;
}

TEST(GgufFileMalformedTest, StringLengthPastEof) {
  ExpectInvalid(Header(0, 1).Str("k").U32(8).U64(1000).Raw("abc").s,
                "key 'k': string length 1000 at byte offset 37 runs past the end");
}

TEST(GgufFileMalformedTest, KeyLongerThanLimit) {
  ExpectInvalid(Header(0, 1).U64(70000).Raw(std::string(16, 'k')).s,
                "key length 70000 at byte offset 24 exceeds the limit");
}

TEST(GgufFileMalformedTest, HugeCounts) {
  ExpectInvalid(Header(~uint64_t{0}, 0).s, "tensor count 18446744073709551615");
  ExpectInvalid(Header(0, uint64_t{1} << 62).s, "kv count 4611686018427387904");
  ExpectInvalid(Header(0, 1).Str("a").U32(9).U32(4).U64(uint64_t{1} << 61).s,
                "key 'a': array element count 2305843009213693952");
  ExpectInvalid(Header(0, 1).Str("a").U32(9).U32(8).U64(~uint64_t{0} / 2).s,
                "string array element count");
}

TEST(GgufFileMalformedTest, NestedArray) {
  ExpectInvalid(Header(0, 1).Str("a").U32(9).U32(9).U64(1).U32(4).U64(0).s,
                "key 'a': nested array at byte offset 37");
}

TEST(GgufFileMalformedTest, UnknownValueType) {
  ExpectInvalid(Header(0, 1).Str("a").U32(13).U64(0).s, "key 'a': unknown value type 13");
  ExpectInvalid(Header(0, 1).Str("a").U32(9).U32(77).U64(0).s, "unknown array element type 77");
}

TEST(GgufFileMalformedTest, DuplicateKey) {
  ExpectInvalid(Header(0, 2).Str("a").U32(4).U32(1).Str("a").U32(4).U32(2).s,
                "duplicate key 'a' (kv #1 at byte offset 41)");
}

TEST(GgufFileMalformedTest, AlignmentNotPowerOfTwo) {
  ExpectInvalid(Header(0, 1).Str("general.alignment").U32(4).U32(48).s,
                "'general.alignment' = 48 is not a non-zero power of two");
  ExpectInvalid(Header(0, 1).Str("general.alignment").U32(4).U32(0).s, "= 0 is not");
  ExpectInvalid(Header(0, 1).Str("general.alignment").U32(5).U32(32).s, "type i32, want u32");
}

TEST(GgufFileMalformedTest, UnknownTensorType) {
  ExpectInvalid(OneTensor({32}, 4, 0, 32), "tensor 'w': unknown ggml type 4");
  ExpectInvalid(OneTensor({32}, 1000, 0, 32), "unknown ggml type 1000");
}

TEST(GgufFileMalformedTest, NDimsOutOfRange) {
  ExpectInvalid(OneTensor({}, kF32, 0, 32), "tensor 'w': n_dims 0 at byte offset 33");
  ExpectInvalid(OneTensor({1, 1, 1, 1, 1}, kF32, 0, 32), "n_dims 5");
}

TEST(GgufFileMalformedTest, BadDimensions) {
  ExpectInvalid(OneTensor({4, 0}, kF32, 0, 32), "ne[1] = 0");
  ExpectInvalid(OneTensor({~uint64_t{0}}, kF32, 0, 32), "ne[0] = 18446744073709551615");
  ExpectInvalid(OneTensor({uint64_t{1} << 32, uint64_t{1} << 32}, kF32, 0, 32),
                "element count of shape {4294967296, 4294967296} overflows");
  ExpectInvalid(OneTensor({uint64_t{1} << 40}, kF32, 0, 32),
                "F32 data of shape {1099511627776} "
                "is larger than the file size");
}

TEST(GgufFileMalformedTest, Ne0NotMultipleOfBlockSize) {
  ExpectInvalid(OneTensor({48, 2}, kQ4_1, 0, 64), "ne[0] = 48 is not a multiple of the Q4_1 block");
}

TEST(GgufFileMalformedTest, MisalignedOffset) {
  ExpectInvalid(OneTensor({4}, kF32, 16, 64), "data offset 16 at byte offset");
}

TEST(GgufFileMalformedTest, DataPastEof) {
  ExpectInvalid(OneTensor({8}, kF32, 32, 32), "tensor 'w' data [96, 128) exceeds file size 96");
  ExpectInvalid(OneTensor({8}, kF32, ~uint64_t{0} - 31, 32), "overflows");
}

TEST(GgufFileMalformedTest, TensorNameTooLong) {
  ExpectInvalid(OneTensor({8}, kF32, 0, 32, std::string(65, 'x')),
                "tensor #0 at byte offset 24: tensor name length 65");
}

TEST(GgufFileMalformedTest, DuplicateTensor) {
  Bytes b = Header(2, 0);
  TensorInfo(b, "w", {8}, kF32, 0);
  TensorInfo(b, "w", {8}, kF32, 32).PadTo(32);
  b.s.append(64, '\0');
  ExpectInvalid(b.s, "duplicate tensor 'w' (tensor #1");
}

TEST(GgufFileMalformedTest, OverlappingTensors) {
  Bytes b = Header(2, 0);
  TensorInfo(b, "a", {16}, kF32, 0);
  TensorInfo(b, "b", {8}, kF32, 32).PadTo(32);
  b.s.append(64, '\0');
  ExpectInvalid(b.s, "tensors 'a' and 'b' overlap");
}
}  // namespace
}  // namespace pdserve
