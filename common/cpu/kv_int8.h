// Symmetric int8 quantisation of KV cache rows and the two products that
// attention takes over them, dequantising on the fly.
//
// One scale per (token, kv head) row slice of head_dim values:
// scale = absmax / 127, q = round(x / scale) in [-127, 127], x ~= q * scale,
// so every element is within scale / 2 of its input (|x| <= absmax keeps the
// clamp inactive). A slice of zeros stores scale 0 and decodes to zeros.
//
// Why per token and not one scale per (block, head): decode writes a block
// one token at a time, so a per-block scale would have to be fixed before the
// block's absmax is known and requantised whenever a later token exceeds it,
// and the stored bytes (and hence the outputs) would then depend on whether a
// block was written by one prefill step or by many decode steps, i.e. on
// chunking, prefix-cache hits and on which tier computed it. Per-token scales
// make a token's stored bytes a function of its K/V values alone, never
// requantise, and cost n_kv_heads f32 per token and layer for each of K and V
// (4 bytes per head_dim int8 values: 6% on SmolLM2's head_dim 64).
//
// Stateless, thread-safe.
#ifndef PDSERVE_COMMON_CPU_KV_INT8_H_
#define PDSERVE_COMMON_CPU_KV_INT8_H_

#include <cstdint>

namespace pdserve {

// Quantises x[0, n) into q and returns the scale.
float QuantizeKvInt8(const float* x, int n, int8_t* q);

// out[i] = q[i] * scale.
void DequantizeKvInt8(const int8_t* q, float scale, int n, float* out);

// sum_i q[i] * x[i] (the caller multiplies by the row's scale).
float DotKvInt8(const int8_t* q, const float* x, int n);

// acc[i] += a * q[i] (the caller folds the row's scale into a).
void AxpyKvInt8(float a, const int8_t* q, float* acc, int n);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_CPU_KV_INT8_H_
