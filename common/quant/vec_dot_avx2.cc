// AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c).
#define PDS_X86_NAMESPACE kernels_avx2
#define PDS_X86_VNNI 0
#include "common/quant/vec_dot_x86.inc"
