// AVX2 packed kernels with AVX-VNNI's VEX vpdpbusd/vpdpwssd (compiled with
// -mavx2 -mfma -mf16c -mavxvnni): Intel since Alder Lake, AMD since Zen 5
// for 256-bit code on CPUs without AVX-512.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "common/quant/group_prefetch.h"
#include "common/quant/packed_gemm.h"
#include "common/quant/quant_blocks.h"

namespace pdserve::packed_avxvnni {
#define PDS_PACKED_VNNI 1
#include "common/quant/packed_gemm_avx2.inc"
}  // namespace pdserve::packed_avxvnni
