// Scalar dequantisation of one row per GGML type (the formulas in
// shared/reference/smollm2-gguf.md §2). Used for embedding lookups, for
// norms stored in non-f32 types, and as the reference in kernel tests.
#ifndef PDSERVE_COMMON_QUANT_DEQUANTIZE_H_
#define PDSERVE_COMMON_QUANT_DEQUANTIZE_H_

#include <cstdint>

#include "common/quant/quant_blocks.h"

namespace pdserve {

void DequantF32(const void* src, float* dst, int64_t n);
void DequantF16(const void* src, float* dst, int64_t n);
void DequantBf16(const void* src, float* dst, int64_t n);
void DequantQ4_0(const void* src, float* dst, int64_t n);
void DequantQ4_1(const void* src, float* dst, int64_t n);
void DequantQ5_0(const void* src, float* dst, int64_t n);
void DequantQ5_1(const void* src, float* dst, int64_t n);
void DequantQ8_0(const void* src, float* dst, int64_t n);
void DequantQ8_1(const void* src, float* dst, int64_t n);
void DequantQ4_K(const void* src, float* dst, int64_t n);
void DequantQ5_K(const void* src, float* dst, int64_t n);
void DequantQ6_K(const void* src, float* dst, int64_t n);
// Q4_K and Q5_K differ only in Q5_K's fifth bit: 16 when bit `bit` of
// qh[l] is set (bit 2c for sub-block 2c's element l, 2c + 1 for 2c + 1).
inline int KQuantHighBit(const BlockQ4_K&, int, uint8_t) { return 0; }
inline int KQuantHighBit(const BlockQ5_K& b, int l, uint8_t bit) { return b.qh[l] & bit ? 16 : 0; }

// The 5-bit value of element j (0..31) of a Q5_0/Q5_1 block, before the
// Q5_0 offset of -16.
inline int Q5Value(const uint8_t* qs, uint32_t qh, int j) {
  const int low = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
  return low | static_cast<int>(((qh >> j) & 1u) << 4);
}
void DequantQ8_K(const void* src, float* dst, int64_t n);

// The 6-bit scale/min unpacking shared by Q4_K (and Q5_K).
void UnpackQ4KScaleMin(int j, const uint8_t* q, uint8_t* sc, uint8_t* m);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_QUANT_DEQUANTIZE_H_
