// AVX2 kernels with the integer dot products done by AVX512-VNNI's 256-bit
// vpdpbusd (compiled with -mavx2 -mfma -mf16c -mavx512f -mavx512vl
// -mavx512vnni), one instruction where AVX2 needs two.
#define PDS_X86_NAMESPACE kernels_avx512vnni
#define PDS_X86_VNNI 1
#include "common/quant/vec_dot_x86.inc"
