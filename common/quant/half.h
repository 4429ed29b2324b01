// Scalar conversions between f32 and the 16-bit float formats GGUF uses
// (IEEE binary16 "f16" and bfloat16). Header-only so kernels inline them.
// f32 -> f16 rounds to nearest even, like F16C's _mm256_cvtps_ph with
// _MM_FROUND_TO_NEAREST_INT and like ggml's scalar fallback.
#ifndef PDSERVE_COMMON_QUANT_HALF_H_
#define PDSERVE_COMMON_QUANT_HALF_H_

#include <cstdint>
#include <cstring>

namespace pdserve {

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint32_t FloatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Exact f16 -> f32 (handles subnormals, inf and NaN).
inline float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return BitsToFloat(sign | 0x7F800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return BitsToFloat(sign);
    // Subnormal: value = mant * 2^-24.
    const float v = static_cast<float>(mant) * BitsToFloat(0x33800000u);
    return (sign != 0) ? -v : v;
  }
  return BitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

// f32 -> f16 with round-to-nearest-even; overflow goes to inf, NaN stays NaN.
inline uint16_t F32ToF16(float f) {
  const uint32_t x = FloatToBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);  // NaN
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520 -> inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: let the FPU round by adding 0.5 (2^-1),
    // which aligns the f16 subnormal ulp (2^-24) with the f32 mantissa lsb.
    const float shifted = BitsToFloat(abs) + 0.5f;
    return static_cast<uint16_t>(sign | (FloatToBits(shifted) - 0x3F000000u));
  }
  const uint32_t mant_odd = (abs >> 13) & 1u;
  const uint32_t rounded = abs + 0xC8000FFFu + mant_odd;  // rebias exp by -112, add rounding
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

inline float Bf16ToF32(uint16_t h) { return BitsToFloat(static_cast<uint32_t>(h) << 16); }

// f32 -> bf16 with round-to-nearest-even (NaN kept quiet), as ggml does.
inline uint16_t F32ToBf16(float f) {
  const uint32_t x = FloatToBits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 64u);
  return static_cast<uint16_t>((x + (0x7FFFu + ((x >> 16) & 1u))) >> 16);
}

// Rounds an f32 through f16 and back: emulates a value stored as f16.
inline float RoundThroughF16(float f) { return F16ToF32(F32ToF16(f)); }

}  // namespace pdserve

#endif  // PDSERVE_COMMON_QUANT_HALF_H_
