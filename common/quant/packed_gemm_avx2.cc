// Plain AVX2 packed kernels (compiled with -mavx2 -mfma -mf16c): u8 x s8
// products through maddubs + madd.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "common/quant/group_prefetch.h"
#include "common/quant/packed_gemm.h"
#include "common/quant/quant_blocks.h"

namespace pdserve::packed_avx2 {
#define PDS_PACKED_VNNI 0
#include "common/quant/packed_gemm_avx2.inc"
}  // namespace pdserve::packed_avx2
