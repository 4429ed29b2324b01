// GELU-gated feed-forward activation as llama.cpp's CPU backend computes it
// (ggml_vec_geglu_f32 with GGML_GELU_FP16): gelu(x) is the tanh
// approximation looked up in a table of every f16 input, so x is rounded to
// f16 and the result comes back as f16; |x| >= 10 bypasses the table.
//
// Thread-safe: the table is built once, on first use.
#ifndef PDSERVE_COMMON_CPU_GELU_H_
#define PDSERVE_COMMON_CPU_GELU_H_

#include <cstdint>

namespace pdserve {

// gelu(x) by the formula, in float: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))).
float GeluTanh(float x);

// gate[r][i] = gelu(gate[r][i]) * up[r][i] for `rows` rows of `n`.
void GeluMulRows(float* gate, const float* up, int64_t rows, int64_t n);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_CPU_GELU_H_
