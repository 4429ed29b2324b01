// Per-weight-type kernel table: dequantise a row, quantise activations into
// the type llama.cpp pairs with that weight type (its "vec_dot_type"), and
// dot one weight row with one quantised activation row.
//
// The table is chosen once at start-up from the CPU's features (AVX2+FMA+F16C
// or scalar); both variants quantise activations bit-identically, so they
// differ only in float summation order. Thread-safe: the tables are
// immutable after the first call.
#ifndef PDSERVE_COMMON_QUANT_KERNELS_H_
#define PDSERVE_COMMON_QUANT_KERNELS_H_

#include <cstdint>

#include "common/gguf/ggml_type.h"
#include "common/quant/packed_layout.h"

namespace pdserve {

using DequantRowFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeActFn = void (*)(const float* src, void* dst, int64_t n);
using VecDotFn = float (*)(int64_t n, const void* w, const void* a);
// Dots four weight rows (row stride in bytes) with one activation row.
using VecDot4Fn = void (*)(int64_t n, const void* w, int64_t w_stride, const void* a, float* out);
// Dots one weight row with `n_tokens` activation rows (a_stride bytes
// apart): out[t * out_stride] = vec_dot(n, w, a + t * a_stride), bit for
// bit, each weight block unpacked once for a tile of tokens. A step of
// several tokens (a prefill chunk, a speculative draft's rows) then costs
// the activation-side arithmetic per token, not the whole dot.
using VecDotTokensFn = void (*)(int64_t n, const void* w, const void* a, int64_t a_stride,
                                int64_t n_tokens, float* out, int64_t out_stride);

// Packed weights (see common/cpu/packed_weights.h): layouts in
// common/quant/packed_layout.h.

// One packed matmul call: output rows [0, n_rows) of the row groups starting
// at `w`, for tokens [0, n_tokens).
struct PackedGemmArgs {
  const uint8_t* w;
  int64_t n_groups;
  int64_t n_rows;    // <= n_groups * kPackedRows
  int64_t n_blocks;  // blocks per row (32 elements, or 256 for K-quants)
  // Quantised activation rows (Q8_1, Q8_0 or Q8_K blocks), row t at
  // act + t * act_stride.
  const uint8_t* act;
  int64_t act_stride;
  // Per Q8_0/Q8_1 activation block [t * n_blocks + b]: d as f32, and s as
  // f32 (Q8_1 only); for kernels with a slice bias (TypeKernels), the
  // initial value of each of the block's eight 4-element slice sums,
  // -bias * (sum of the slice's int8 values), [(t * n_blocks + b) * 8 + slice].
  // K-quant kernels read everything from the Q8_K blocks.
  const float* act_d;
  const float* act_s;
  const int32_t* act_offsets;
  int64_t n_tokens;
  float* y;  // y[t * ldy + r]
  int64_t ldy;
};
using PackedGemmFn = void (*)(const PackedGemmArgs& args);

struct TypeKernels {
  GgmlType weight_type;
  GgmlType act_type;
  DequantRowFn dequant;
  QuantizeActFn quantize_act;
  VecDotFn vec_dot;
  VecDot4Fn vec_dot4;  // may be null: callers fall back to vec_dot
  // Null unless this ISA has a packed kernel for the type.
  PackedGemmFn packed_gemm;
  // The packed kernel reads weights as unsigned w + bias (Q8_0: 128,
  // Q5_0: 16) and starts each slice sum from -bias * (activation slice
  // sum), which the matmul precomputes; 0 where it needs no offsets.
  int32_t packed_slice_bias = 0;
  // Null where this ISA has none (callers loop over vec_dot).
  VecDotTokensFn vec_dot_tokens = nullptr;
};

// Kernels used by attention over the f16 KV cache.
struct AttentionKernels {
  // sum_i k[i] * q[i], k f16, q f32 (already rounded through f16 by caller).
  float (*dot_f16)(const uint16_t* k, const float* q, int n);
  // acc[i] += a * v[i], v f16.
  void (*axpy_f16)(float a, const uint16_t* v, float* acc, int n);
  // dst[i] = f16(src[i]).
  void (*to_f16)(const float* src, uint16_t* dst, int n);
  // out[r] = dot_f16(k, q + r * n, n) for r < rows, each summed exactly as
  // dot_f16 sums it; k is read (and converted) once for all rows.
  void (*dot_f16_rows)(const uint16_t* k, const float* q, int n, int rows, float* out);
  // axpy_f16(a[c], v[c], acc, n) for c = 0, 1, ..., count - 1 in that order,
  // each exactly as axpy_f16 computes it; acc stays in registers meanwhile
  // (a load-add-store per position made the store port the bottleneck).
  void (*axpy_f16_seq)(const float* a, const uint16_t* const* v, int count, float* acc, int n);
};

enum class KernelIsa { kScalar, kAvx2, kAvx512Vnni };

// The ISA in use: the best the CPU supports unless overridden.
KernelIsa ActiveKernelIsa();
// Test hook: forces an ISA (falls back to the best supported one below it). Not thread-safe with
// concurrent kernel lookups; call before any engine work.
void ForceKernelIsaForTesting(KernelIsa isa);
bool CpuSupportsAvx2();
bool CpuSupportsAvx512Vnni();
// "scalar", "avx2" or "avx512": flag values and test names.
const char* KernelIsaName(KernelIsa isa);

// Returns nullptr when `weight_type` has no matmul kernels.
const TypeKernels* FindTypeKernels(uint32_t weight_type);
const AttentionKernels& GetAttentionKernels();

// Byte size of the activation buffer for `n` elements quantised for
// `weight_type` (n must be a multiple of the activation block size).
int64_t ActivationRowBytes(uint32_t weight_type, int64_t n);

namespace kernels_scalar {
const TypeKernels* Find(uint32_t weight_type);
extern const AttentionKernels kAttention;
}  // namespace kernels_scalar

namespace kernels_avx2 {
// Fills in AVX2 versions of vec_dot/vec_dot4/quantize_act where they exist,
// starting from the scalar table entry.
TypeKernels Upgrade(const TypeKernels& scalar);
extern const AttentionKernels kAttention;
}  // namespace kernels_avx2

namespace kernels_avx512vnni {
TypeKernels Upgrade(const TypeKernels& scalar);
extern const AttentionKernels kAttention;
}  // namespace kernels_avx512vnni

}  // namespace pdserve

#endif  // PDSERVE_COMMON_QUANT_KERNELS_H_
