// Many-token kernels over packed weights (common/quant/packed_layout.h) for
// Q5_0, Q4_K and Q6_K, in three variants: AVX-512 (F/BW/VL/DQ + VNNI), AVX2
// with AVX-VNNI, and plain AVX2; and Q8_0 on AVX-512 (its AVX2 kernel and
// Q4_1's are in vec_dot_x86.inc). Each computes, for every row and token, the
// one-token vec_dot's integer lane sums and then exactly its float
// operations in its order, so every variant is bit-identical to it (and so
// to the others). kernel_dispatch.cc puts the best one the CPU runs in the
// kernel table; tests call each variant directly.
#ifndef PDSERVE_COMMON_QUANT_PACKED_GEMM_H_
#define PDSERVE_COMMON_QUANT_PACKED_GEMM_H_

#include <cstdint>
#include <optional>

#include "common/quant/kernels.h"

namespace pdserve {

enum class PackedVariant { kAvx2, kAvxVnni, kAvx512 };

// The packed kernel of weight `type` in `variant`, or null where it has none
// (Q4_1, and Q8_0 on AVX2, have theirs in the vec_dot tables). The caller checks the
// CPU (CpuSupportsPackedVariant).
PackedGemmFn FindPackedGemm(PackedVariant variant, uint32_t type);
// The slice bias those kernels read activations with (PackedGemmArgs).
int32_t PackedSliceBias(uint32_t type);
bool CpuSupportsPackedVariant(PackedVariant variant);
// The many-token kernels an ISA's kernel table holds on this CPU (AVX2 with
// AVX-VNNI where it has it); none for scalar.
std::optional<PackedVariant> PackedVariantOf(KernelIsa isa);
// Weight bytes per panel of row groups in the kernels' loops: half of this
// core's L2 (read once), within [128 KiB, 768 KiB], so a panel stays in L2
// while every token tile passes over it. Panels sized for a 2 MiB L2 thrash
// a 512 KiB one: on a Zen 3 the AVX2 kernels ran 25-40% slower.
int64_t PackedPanelWeightBytes();
// The rule above for an L2 of `l2_bytes` (<= 0: unknown, taken as 512 KiB).
int64_t PanelWeightBytesForL2(int64_t l2_bytes);
const char* PackedVariantName(PackedVariant variant);

#define PDS_DECLARE_PACKED_GEMMS(ns)      \
  namespace ns {                          \
  void GemmQ5_0(const PackedGemmArgs& a); \
  void GemmQ4_K(const PackedGemmArgs& a); \
  void GemmQ6_K(const PackedGemmArgs& a); \
  }
PDS_DECLARE_PACKED_GEMMS(packed_avx512)
namespace packed_avx512 {
void GemmQ8_0(const PackedGemmArgs& a);
}
PDS_DECLARE_PACKED_GEMMS(packed_avxvnni)
PDS_DECLARE_PACKED_GEMMS(packed_avx2)
#undef PDS_DECLARE_PACKED_GEMMS

}  // namespace pdserve

#endif  // PDSERVE_COMMON_QUANT_PACKED_GEMM_H_
