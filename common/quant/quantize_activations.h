// Quantisation of f32 activation rows into the block formats that llama.cpp
// pairs with each weight type. The rounding follows ggml's x86 SIMD path
// (multiply by 127/amax, round half to even), which is what makes our
// integer dot products see the same int8 values llama.cpp sees.
#ifndef PDSERVE_COMMON_QUANT_QUANTIZE_ACTIVATIONS_H_
#define PDSERVE_COMMON_QUANT_QUANTIZE_ACTIVATIONS_H_

#include <cstdint>

namespace pdserve {

void QuantizeRowQ8_0(const float* x, void* dst, int64_t n);
void QuantizeRowQ8_1(const float* x, void* dst, int64_t n);
void QuantizeRowQ8_K(const float* x, void* dst, int64_t n);
void QuantizeRowF16(const float* x, void* dst, int64_t n);
void QuantizeRowBf16(const float* x, void* dst, int64_t n);
void QuantizeRowF32(const float* x, void* dst, int64_t n);

// Reference weight quantisers (ggml's *_ref formulas), used to write test
// and random-weight model files; not on any hot path.
void QuantizeRowQ4_0(const float* x, void* dst, int64_t n);
void QuantizeRowQ4_1(const float* x, void* dst, int64_t n);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_QUANT_QUANTIZE_ACTIVATIONS_H_
