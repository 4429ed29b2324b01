#include "common/quant/packed_gemm.h"

#include <unistd.h>

#include <algorithm>

#include "common/gguf/ggml_type.h"

namespace pdserve {
namespace {

struct Gemms {
  PackedGemmFn q5_0, q4_k, q6_k, q8_0;
};

Gemms GemmsOf(PackedVariant variant) {
  switch (variant) {
    case PackedVariant::kAvx512:
      return {packed_avx512::GemmQ5_0, packed_avx512::GemmQ4_K, packed_avx512::GemmQ6_K,
              packed_avx512::GemmQ8_0};
    case PackedVariant::kAvxVnni:
      return {packed_avxvnni::GemmQ5_0, packed_avxvnni::GemmQ4_K, packed_avxvnni::GemmQ6_K,
              nullptr};
    case PackedVariant::kAvx2:
      break;
  }
  return {packed_avx2::GemmQ5_0, packed_avx2::GemmQ4_K, packed_avx2::GemmQ6_K, nullptr};
}

}  // namespace

PackedGemmFn FindPackedGemm(PackedVariant variant, uint32_t type) {
  const Gemms g = GemmsOf(variant);
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kQ5_0:
      return g.q5_0;
    case GgmlType::kQ4_K:
      return g.q4_k;
    case GgmlType::kQ6_K:
      return g.q6_k;
    case GgmlType::kQ8_0:
      return g.q8_0;
    default:
      return nullptr;
  }
}

int32_t PackedSliceBias(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kQ5_0:
      return 16;
    case GgmlType::kQ8_0:
      return 128;
    default:
      return 0;
  }
}

bool CpuSupportsPackedVariant(PackedVariant variant) {
  switch (variant) {
    case PackedVariant::kAvx512:
      return CpuSupportsAvx512Vnni();
    case PackedVariant::kAvxVnni:
      __builtin_cpu_init();
      return CpuSupportsAvx2() && __builtin_cpu_supports("avxvnni");
    case PackedVariant::kAvx2:
      break;
  }
  return CpuSupportsAvx2();
}

int64_t PanelWeightBytesForL2(int64_t l2_bytes) {
  const int64_t half = l2_bytes > 0 ? l2_bytes / 2 : int64_t{256} << 10;
  return std::clamp<int64_t>(half, int64_t{128} << 10, int64_t{768} << 10);
}

int64_t PackedPanelWeightBytes() {
  // sysconf gives 0 or -1 where the L2 size is unknown.
  static const int64_t bytes = PanelWeightBytesForL2(sysconf(_SC_LEVEL2_CACHE_SIZE));
  return bytes;
}

const char* PackedVariantName(PackedVariant variant) {
  switch (variant) {
    case PackedVariant::kAvx512:
      return "avx512";
    case PackedVariant::kAvxVnni:
      return "avxvnni";
    case PackedVariant::kAvx2:
      break;
  }
  return "avx2";
}

}  // namespace pdserve
