// Q5_0, Q5_1 and Q5_K decoding against ggml's own, via gguf-py's numpy port
// (tests/data/quant_golden.json from tests/data/make_quant_golden.py), bit
// for bit. Their dot kernels are checked against the decoded values in
// quant_kernels_test.
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "common/gguf/ggml_type.h"
#include "common/quant/kernels.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/golden/test_model.h"

namespace pdserve {
namespace {

uint32_t TypeId(const std::string& name) {
  for (uint32_t id = 0; id < 32; ++id) {
    const GgmlTypeTraits* t = FindGgmlTypeTraits(id);
    if (t != nullptr && t->name == name) return id;
  }
  return 1000;
}

TEST(QuantGoldenTest, DequantisationMatchesGgml) {
  std::ifstream f(testing::SourceDir() + "/tests/data/quant_golden.json");
  ASSERT_TRUE(f.good()) << "tests/data/quant_golden.json missing; set PDSERVE_SOURCE_DIR";
  const nlohmann::json golden = nlohmann::json::parse(f);
  int rows = 0;
  for (const auto& e : golden.at("entries")) {
    const std::string type = e.at("type");
    const int64_t n = e.at("n");
    const std::string bytes = absl::HexStringToBytes(e.at("bytes_hex").get<std::string>());
    const std::string want_bytes = absl::HexStringToBytes(e.at("f32_hex").get<std::string>());
    ASSERT_EQ(static_cast<int64_t>(bytes.size()), GgmlRowBytes(TypeId(type), n)) << type;
    ASSERT_EQ(static_cast<int64_t>(want_bytes.size()), n * 4) << type;
    std::vector<float> want(n);
    std::memcpy(want.data(), want_bytes.data(), want_bytes.size());
    const TypeKernels* k = FindTypeKernels(TypeId(type));
    ASSERT_NE(k, nullptr) << type << " has no kernels";
    std::vector<float> got(n);
    k->dequant(bytes.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << type << " element " << i;
    ++rows;
  }
  EXPECT_EQ(rows, 9);
}

}  // namespace
}  // namespace pdserve
