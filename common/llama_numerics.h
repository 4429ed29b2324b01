// Elementwise and attention numerics that reproduce llama.cpp's CPU backend
// (ggml as built with AVX512F+DQ) bit for bit: its exp approximation
// (ggml_v_expf, 16 lanes), SiLU, softmax sums and the f16 dot products of
// its non-flash attention, including their exact summation order.
//
// The AVX512 implementations live in llama_numerics_avx512.cc, compiled with
// those ISA flags and reached only through the dispatching functions below
// after a run-time CPU check. Elsewhere (or when a test forces the scalar
// kernel ISA) callers keep their portable code, which agrees to rounding.
// This header declares no inline functions on purpose: a copy compiled with
// AVX512 flags must never be the one the linker keeps.
//
// Thread-safe: everything here is stateless.
#ifndef PDSERVE_COMMON_LLAMA_NUMERICS_H_
#define PDSERVE_COMMON_LLAMA_NUMERICS_H_

#include <cstdint>

namespace pdserve {

// Where one KV head's rows of one layer live in the paged cache. Position j
// is in block block_table[j / block_size] at row j % block_size; a block's K
// rows start at base + block * block_stride and its V rows v_offset
// elements later. All offsets are in f16 elements. A plain aggregate (no
// initialisers), so that it brings no constructor into the AVX512 unit.
struct KvHeadRows {
  const uint16_t* base;  // K row 0 of block 0, at this head
  const int32_t* block_table;
  int64_t block_stride;
  int64_t v_offset;
  int64_t row_stride;  // between consecutive positions of a block
  int block_size;
};

// True when the kernels below reproduce llama.cpp here: the CPU has
// AVX512F+DQ (with FMA and F16C) and the kernel ISA is not forced to scalar.
bool LlamaExactNumericsActive();

// gate[r][i] = silu(gate[r][i]) * up[r][i] for `rows` rows of `n`, with
// ggml_vec_silu_f32's 16-lane chunks per row, then a separate multiply.
// Requires LlamaExactNumericsActive().
void LlamaSiluMulRows(float* gate, const float* up, int64_t rows, int64_t n);

// Bytes of float scratch LlamaAttendHead needs.
int64_t LlamaAttendScratchFloats(int head_dim, int n_ctx);

// One query head over positions [0, n_ctx), as llama.cpp's non-flash path
// computes it with the KV length padded to 32: kq = vec_dot_f16(q, k_j),
// softmax(kq * scale) with ggml_v_expf and a double sum of 16-lane partial
// sums, probabilities rounded to f16, out[d] = vec_dot_f16 over positions
// of V[.][d] and the probabilities. q_f16 holds head_dim f16 values.
// Requires LlamaExactNumericsActive(), head_dim % 16 == 0, head_dim <= 512
// and LlamaAttendScratchFloats(head_dim, n_ctx) floats of scratch.
void LlamaAttendHead(const uint16_t* q_f16, int head_dim, float scale, int n_ctx,
                     const KvHeadRows& kv, float* scratch, float* out);

namespace llama_numerics_avx512 {
void SiluMulRows(float* gate, const float* up, int64_t rows, int64_t n);
void AttendHead(const uint16_t* q_f16, int head_dim, float scale, int n_ctx, const KvHeadRows& kv,
                float* scratch, float* out);
}  // namespace llama_numerics_avx512

}  // namespace pdserve

#endif  // PDSERVE_COMMON_LLAMA_NUMERICS_H_
