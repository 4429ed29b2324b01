// Elementwise and attention numerics that reproduce llama.cpp's CPU backend
// (ggml as built with AVX512F+DQ) bit for bit: its exp approximation
// (ggml_v_expf, 16 lanes), SiLU, softmax sums and the f16 dot products of
// its non-flash attention, including their exact summation order.
//
// One implementation (llama_numerics_simd.inc) is written against a 16-lane
// vector type and compiled twice: with AVX512 (llama_numerics_avx512.cc) and
// with AVX2, a 16-lane value as two 8-lane halves and every AVX512-only
// operation rebuilt from exact AVX2 steps (llama_numerics_avx2.cc). Both give
// the same bits, so a CPU without AVX512 reproduces llama.cpp's AVX512 build
// too. Each is reached only through the dispatching functions below after a
// run-time CPU check; with the scalar kernel ISA (or a CPU without AVX2)
// callers keep their portable code, which agrees to rounding.
// This header declares no inline functions on purpose: a copy compiled with
// AVX512 flags must never be the one the linker keeps.
//
// Thread-safe: everything here is stateless.
#ifndef PDSERVE_COMMON_CPU_LLAMA_NUMERICS_H_
#define PDSERVE_COMMON_CPU_LLAMA_NUMERICS_H_

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

// True when the kernels below reproduce llama.cpp here: the CPU has AVX2,
// FMA and F16C and the kernel ISA is not forced to scalar. The AVX512 copy
// runs when the kernel ISA is AVX512 and the CPU has AVX512F+DQ.
bool LlamaExactNumericsActive();

// gate[r][i] = silu(gate[r][i]) * up[r][i] for `rows` rows of `n`, with
// ggml_vec_silu_f32's 16-lane chunks per row, then a separate multiply.
// Requires LlamaExactNumericsActive().
void LlamaSiluMulRows(float* gate, const float* up, int64_t rows, int64_t n);

// The most rows either copy sums V for at once (sizes the scratch).
constexpr int kLlamaMaxRowGroup = 8;

// Float and offset scratch of LlamaAttendRows for `rows` rows of up to
// `n_max` positions.
struct LlamaAttendScratchSize {
  int64_t floats;
  int64_t offsets;
};
LlamaAttendScratchSize LlamaAttendScratchNeeded(int head_dim, int rows, int n_max);

// Query rows of one KV head, as llama.cpp's non-flash path computes each
// with the KV length padded to 256: kq = vec_dot_f16(q, k_j), softmax(kq *
// scale) with ggml_v_expf and a double sum of 16-lane partial sums,
// probabilities rounded to f16, out[d] = vec_dot_f16 over positions of
// V[.][d] and the probabilities. Row r (head_dim f16 values at
// q_f16 + r * head_dim) attends positions [lo[r], n_ctx[r]) and writes
// head_dim floats to out[r]. `lo` (null: all 0) is a sliding window's
// start: positions below it are llama.cpp's masked ones, and none below
// lo[0] rounded down to 64 is read, so the blocks holding them may be
// gone. The rows share every K/V row they read, and each row's
// result has the same bits as when it is attended alone.
// Requires LlamaExactNumericsActive(), head_dim % 16 == 0, head_dim <= 512,
// 1 <= n_ctx[0] <= n_ctx[1] <= ..., lo[0] <= lo[1] <= ... with lo[r] <
// n_ctx[r], every position from lo[0] rounded down to 64 to the last readable,
// and LlamaAttendScratchNeeded(head_dim, rows, n_ctx[rows - 1]) of scratch.
// A row's equality with itself alone also needs finite V below the last
// row's context: rows summed together weight positions they do not see by
// 0, and 0 * inf is NaN (llama.cpp, which pads a batch's rows to one KV
// length, has the same NaN there).
void LlamaAttendRows(const uint16_t* q_f16, int rows, const int* n_ctx, const int* lo,
                     int head_dim, float scale, const KvHeadRows& kv, float* scratch,
                     int64_t* offsets, float* const* out);

// The two copies LlamaSiluMulRows and LlamaAttendRows dispatch to.
namespace llama_numerics_avx512 {
void SiluMulRows(float* gate, const float* up, int64_t rows, int64_t n);
void AttendRows(const uint16_t* q_f16, int rows, const int* n_ctx, const int* lo, int head_dim,
                float scale, const KvHeadRows& kv, float* scratch, int64_t* offsets,
                float* const* out);
}  // namespace llama_numerics_avx512
namespace llama_numerics_avx2 {
void SiluMulRows(float* gate, const float* up, int64_t rows, int64_t n);
void AttendRows(const uint16_t* q_f16, int rows, const int* n_ctx, const int* lo, int head_dim,
                float scale, const KvHeadRows& kv, float* scratch, int64_t* offsets,
                float* const* out);
}  // namespace llama_numerics_avx2

// Test hook: which copy LlamaSiluMulRows and LlamaAttendRows run.
enum class LlamaNumericsIsa { kNone, kAvx2, kAvx512 };
LlamaNumericsIsa ActiveLlamaNumericsIsa();

}  // namespace pdserve

#endif  // PDSERVE_COMMON_CPU_LLAMA_NUMERICS_H_
