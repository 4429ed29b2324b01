#include "common/gguf/gguf_file.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/gguf/gguf_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_test_util.h"
#include "tests/testing/temp_dir.h"

namespace pdserve {
namespace {

using ::pdserve::gguf_test::Bytes;
using ::pdserve::gguf_test::Header;
using ::pdserve::gguf_test::kF16;
using ::pdserve::gguf_test::kF32;
using ::pdserve::gguf_test::kQ4_1;
using ::pdserve::gguf_test::kQ4_K;
using ::pdserve::gguf_test::kQ8_0;
using ::pdserve::gguf_test::ParseStatus;
using ::pdserve::gguf_test::Pattern;
using ::pdserve::testing::ScopedTempDir;
using ::testing::HasSubstr;

void AddAllScalars(GgufWriter& w) {
  w.AddUint8("t.u8", 200);
  w.AddInt8("t.i8", -100);
  w.AddUint16("t.u16", 60000);
  w.AddInt16("t.i16", -30000);
  w.AddUint32("t.u32", 4000000000u);
  w.AddInt32("t.i32", -2000000000);
  w.AddFloat32("t.f32", 1.5f);
  w.AddBool("t.bool", true);
  w.AddString("t.str", "hello");
  w.AddUint64("t.u64", uint64_t{1} << 63);
  w.AddInt64("t.i64", -(int64_t{1} << 60));
  w.AddFloat64("t.f64", 0.1);
}

TEST(GgufFileTest, RoundTripsEveryValueType) {
  GgufWriter w;
  AddAllScalars(w);
  w.AddStringArray("t.strs", {"a", "", "ccc"});
  w.AddInt32Array("t.ints", {1, -2, 3});
  w.AddFloat32Array("t.floats", {0.5f, -1.25f});
  auto f = GgufFile::FromBuffer(w.Serialize());
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), 32u);
  EXPECT_EQ(g.keys().size(), 15u);
  EXPECT_EQ(g.keys().front(), "t.u8");
  EXPECT_EQ(*g.GetUint("t.u8"), 200u);
  EXPECT_EQ(*g.GetInt("t.i8"), -100);
  EXPECT_EQ(*g.GetUint("t.u16"), 60000u);
  EXPECT_EQ(*g.GetInt("t.i16"), -30000);
  EXPECT_EQ(*g.GetUint("t.u32"), 4000000000u);
  EXPECT_EQ(*g.GetInt("t.u32"), 4000000000);
  EXPECT_EQ(*g.GetInt("t.i32"), -2000000000);
  EXPECT_EQ(*g.GetFloat("t.f32"), 1.5);
  EXPECT_TRUE(*g.GetBool("t.bool"));
  EXPECT_EQ(*g.GetString("t.str"), "hello");
  EXPECT_EQ(*g.GetUint("t.u64"), uint64_t{1} << 63);
  EXPECT_EQ(*g.GetInt("t.i64"), -(int64_t{1} << 60));
  EXPECT_EQ(*g.GetFloat("t.f64"), 0.1);
  EXPECT_THAT(*g.GetStringArray("t.strs"), ::testing::ElementsAre("a", "", "ccc"));
  EXPECT_THAT(*g.GetIntArray("t.ints"), ::testing::ElementsAre(1, -2, 3));
  EXPECT_THAT(*g.GetFloatArray("t.floats"), ::testing::ElementsAre(0.5, -1.25));
  EXPECT_EQ(g.Find("t.ints")->elem_type, GgufValueType::kI32);
  EXPECT_EQ(g.Find("t.ints")->count, 3u);
  EXPECT_EQ(g.Find("nope"), nullptr);
  EXPECT_TRUE(g.tensors().empty());
}

TEST(GgufFileTest, RoundTripsTensorsWithCustomAlignment) {
  struct Spec {
    const char* name;
    uint32_t type;
    std::vector<int64_t> dims;
    int64_t row_bytes;
    int64_t nbytes;
  };
  const std::vector<Spec> specs = {{"w.f32", kF32, {4, 2}, 16, 32},
                                   {"w.q8_0", kQ8_0, {64, 2}, 68, 136},
                                   {"w.q4_1", kQ4_1, {32, 3, 2}, 20, 120},
                                   {"w.f16", kF16, {3}, 6, 6},
                                   {"w.q4_k", kQ4_K, {256, 1, 1, 2}, 144, 288}};
  GgufWriter w;
  w.AddUint32("general.alignment", 64);
  for (size_t i = 0; i < specs.size(); ++i) {
    ASSERT_TRUE(w.AddTensor(specs[i].name, specs[i].type, specs[i].dims,
                            Pattern(specs[i].nbytes, static_cast<int>(i)))
                    .ok());
  }
  const std::string bytes = w.Serialize();
  EXPECT_EQ(bytes.size() % 64, 0u);
  auto f = GgufFile::FromBuffer(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& g = **f;
  EXPECT_EQ(g.alignment(), 64u);
  ASSERT_EQ(g.tensors().size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const GgufTensorInfo& t = g.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, specs[i].name);
    EXPECT_EQ(&t, g.FindTensor(specs[i].name));
    EXPECT_EQ(t.type, specs[i].type);
    EXPECT_EQ(t.n_dims, static_cast<int>(specs[i].dims.size()));
    int64_t n = 1;
    for (size_t d = 0; d < 4; ++d) {
      const int64_t want = d < specs[i].dims.size() ? specs[i].dims[d] : 1;
      EXPECT_EQ(t.ne[d], want);
      n *= want;
    }
    EXPECT_EQ(t.nelements, n);
    EXPECT_EQ(t.row_bytes, specs[i].row_bytes);
    EXPECT_EQ(t.nbytes, specs[i].nbytes);
    EXPECT_EQ(t.offset % 64, 0u);
    EXPECT_EQ(static_cast<uint64_t>(t.data - g.tensors()[0].data), t.offset);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.data), t.nbytes),
              Pattern(specs[i].nbytes, static_cast<int>(i)));
  }
  EXPECT_EQ(g.FindTensor("missing"), nullptr);
}

TEST(GgufFileTest, AcceptsVersion2) { EXPECT_TRUE(ParseStatus(Header(0, 0, 2).s).ok()); }

TEST(GgufFileTest, GettersRejectValuesThatDoNotFit) {
  GgufWriter w;
  AddAllScalars(w);
  auto f = GgufFile::FromBuffer(w.Serialize());
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& g = **f;
  EXPECT_EQ(g.GetUint("absent").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(g.GetUint("absent").status().message()), HasSubstr("'absent'"));
  EXPECT_EQ(*g.GetUint("t.u8"), 200u);
  EXPECT_THAT(std::string(g.GetUint("t.i8").status().message()),
              HasSubstr("key 't.i8' value -100 is negative"));
  EXPECT_THAT(std::string(g.GetInt("t.u64").status().message()), HasSubstr("does not fit int64"));
  EXPECT_THAT(std::string(g.GetInt("t.f32").status().message()),
              HasSubstr("has type f32, want an integer"));
  EXPECT_FALSE(g.GetFloat("t.u32").ok());
  EXPECT_FALSE(g.GetBool("t.u8").ok());
  EXPECT_FALSE(g.GetString("t.strs").ok());
  EXPECT_FALSE(g.GetStringArray("t.str").ok());
  EXPECT_FALSE(g.GetIntArray("t.i32").ok());
  EXPECT_FALSE(g.GetFloatArray("t.f32").ok());
}

TEST(GgufFileTest, IntArrayGetterChecksEveryElement) {
  Bytes b = Header(0, 2);
  b.Str("a.u64").U32(9).U32(10).U64(2).U64(7).U64(~uint64_t{0});
  b.Str("a.u8").U32(9).U32(0).U64(3).Raw("\x01\x02\xff");
  auto f = GgufFile::FromBuffer(b.s);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_THAT(std::string((*f)->GetIntArray("a.u64").status().message()),
              HasSubstr("key 'a.u64' element #1: value 18446744073709551615 does not fit"));
  EXPECT_THAT(*(*f)->GetIntArray("a.u8"), ::testing::ElementsAre(1, 2, 255));
  EXPECT_FALSE((*f)->GetFloatArray("a.u8").ok());
}

TEST(GgufFileTest, OpenMapsAWrittenFile) {
  GgufWriter w;
  w.AddString("general.name", "tiny");
  ASSERT_TRUE(w.AddTensor("w", kF32, {8}, Pattern(32, 1)).ok());
  const ScopedTempDir dir("gguf-file-test");
  const std::string path = dir.File("open.gguf");
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->size_bytes(), w.Serialize().size());
  EXPECT_EQ(*(*f)->GetString("general.name"), "tiny");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*f)->tensors()[0].data), 32),
            Pattern(32, 1));
}

TEST(GgufFileTest, OpenReportsMissingAndEmptyFiles) {
  EXPECT_EQ(GgufFile::Open("/nonexistent/x.gguf").status().code(), absl::StatusCode::kNotFound);
  const ScopedTempDir dir("gguf-file-test");
  EXPECT_FALSE(GgufFile::Open(dir.path()).ok());  // a directory
  const std::string path = dir.File("empty.gguf");
  std::ofstream(path).close();
  absl::Status s = GgufFile::Open(path).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("truncated magic"));
  EXPECT_THAT(std::string(s.message()), HasSubstr(path));
}

// --- The real model, when a checkout or cache has it.

std::string RealModelPath() {
  const char* kName = "SmolLM2-135M-Instruct.Q4_1.gguf";
  std::vector<std::string> candidates;
  if (const char* src = std::getenv("PDSERVE_SOURCE_DIR")) {
    candidates.push_back(absl::StrCat(src, "/models/", kName));
  }
  if (const char* home = std::getenv("HOME")) {
    candidates.push_back(absl::StrCat(home, "/.cache/pdserve/models/", kName));
  }
  for (const std::string& c : candidates) {
    if (std::ifstream(c).good()) return c;
  }
  return "";
}

TEST(GgufFileRealModelTest, SmolLm2Q4_1) {
  const std::string path = RealModelPath();
  if (path.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf not found";
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.tensors().size(), 272u);
  EXPECT_EQ(g.keys().size(), 33u);
  const GgufTensorInfo* embd = g.FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, kQ8_0);
  EXPECT_EQ(embd->n_dims, 2);
  EXPECT_EQ(embd->ne[0], 576);
  EXPECT_EQ(embd->ne[1], 49152);
  EXPECT_EQ(embd->nbytes, 30081024);
  for (int layer = 0; layer < 30; ++layer) {
    const std::string blk = absl::StrCat("blk.", layer, ".");
    ASSERT_NE(g.FindTensor(blk + "attn_q.weight"), nullptr) << blk;
    EXPECT_EQ(g.FindTensor(blk + "attn_q.weight")->type, kQ4_1) << blk;
    EXPECT_EQ(g.FindTensor(blk + "attn_norm.weight")->type, kF32) << blk;
    EXPECT_EQ(g.FindTensor(blk + "ffn_norm.weight")->type, kF32) << blk;
  }
  EXPECT_EQ(g.FindTensor("output_norm.weight")->type, kF32);
  EXPECT_EQ(g.FindTensor("output.weight"), nullptr);
  EXPECT_EQ(*g.GetString("tokenizer.ggml.pre"), "smollm");
  EXPECT_EQ(g.GetStringArray("tokenizer.ggml.tokens")->size(), 49152u);
  EXPECT_EQ(g.GetStringArray("tokenizer.ggml.merges")->size(), 48900u);
  EXPECT_EQ(*g.GetString("general.architecture"), "llama");
  EXPECT_EQ(*g.GetUint("llama.block_count"), 30u);
}

}  // namespace
}  // namespace pdserve
