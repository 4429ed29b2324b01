// Launchers of the forward pass's elementwise, normalisation and attention
// kernels (the matmuls are cuBLAS) for the llama architecture and the
// features qwen2 and gemma3 add (ModelConfig): Q/K/V biases, NEOX RoPE,
// per-head Q/K norms, post-attention/FFN norms, GELU gating, embedding
// scale, sliding windows. Internal to common/gpu/cuda/.
//
// Activations are row-major [tokens][width] f32; matmul inputs are f16. The
// KV pool has KvCache's layout: layer-major, then block; in a block K rows
// [block_size][kv_dim] f16, then V rows. All launches are asynchronous on
// `stream`; errors surface at the next synchronising call.
#ifndef PDSERVE_COMMON_GPU_CUDA_LLAMA_KERNELS_H_
#define PDSERVE_COMMON_GPU_CUDA_LLAMA_KERNELS_H_

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace pdserve::cuda {

// Per-token metadata of one step, in device memory.
struct StepTokensView {
  const int32_t* token_ids;      // [T]
  const int32_t* positions;      // [T]
  const int32_t* table_offsets;  // [T] start of the token's block table in block_tables
  const int64_t* score_offsets;  // [T] sum of (pos + 1) over earlier tokens
  const int32_t* block_tables;   // concatenated block tables of the step's chunks
  int64_t n_tokens;
};

// One layer's slice of the KV pool.
struct KvLayerView {
  __half* base;             // block 0 of this layer
  int64_t block_elems;      // f16 elements per layer block (K and V)
  int32_t block_size;       // tokens per block
  int32_t kv_dim;           // n_kv_heads * head_dim
};

// x[t] = table[ids[t]] as f32, times `scale` (gemma3's sqrt(n_embd)).
void LaunchEmbed(const __half* table, const int32_t* ids, int64_t n_tokens, int n_embd,
                 float scale, float* x, cudaStream_t stream);

// out[r] = f16(x[r] / sqrt(mean(x[r]^2) + eps) * w).
void LaunchRmsNorm(const float* x, const float* w, int64_t rows, int n, float eps, __half* out,
                   cudaStream_t stream);

// The same in f32, in place allowed: gemma3's post-attention and post-FFN
// norms, which feed the residual, not a GEMM.
void LaunchRmsNormF32(const float* x, const float* w, int64_t rows, int n, float eps, float* out,
                      cudaStream_t stream);

// Per-head RMSNorm in place (qk_norm): in each of n_tokens rows of
// `row_stride` floats, the n_heads heads of head_dim floats starting at
// `offset` are normalised with the shared weight w[head_dim].
void LaunchHeadRmsNorm(float* rows, int64_t row_stride, int64_t offset, int n_heads,
                       int head_dim, const float* w, float eps, int64_t n_tokens,
                       cudaStream_t stream);

// rows[t][i] += bias[i] for i < width (qwen2's Q/K/V biases on the fused
// qkv rows).
void LaunchAddBias(float* rows, const float* bias, int64_t n_tokens, int width,
                   cudaStream_t stream);

// RoPE angles: pos * base^(-2i / dim) / factors[i] (factors may be null)
// * freq_scale, as ggml computes them.
struct RopeParams {
  int rope_dim;
  float base;
  float freq_scale;
  const float* factors;  // device, rope_dim / 2 entries, or nullptr
  bool neox;             // pairs (i, i + rope_dim / 2), else (2i, 2i + 1)
};

// Rotary embedding of the first n_heads heads of each row (q then k heads
// in the fused qkv row), in place.
void LaunchRope(float* rows, int64_t row_stride, int n_heads, int head_dim, const RopeParams& rope,
                const StepTokensView& step, cudaStream_t stream);

// Writes each token's K and V (at k_offset, v_offset in its qkv row) into
// its block slot, as f16.
void LaunchStoreKv(const float* qkv, int64_t row_stride, int64_t k_offset, int64_t v_offset,
                   const StepTokensView& step, const KvLayerView& kv, cudaStream_t stream);

struct AttentionShape {
  int n_heads;
  int n_kv_heads;
  int head_dim;
  float scale;  // multiplies q.k before the softmax
  int window;   // 0 = the whole context, else W: position p attends (p - W, p]
};

// Causal attention of every token over its sequence's cached K/V (positions
// 0..pos, or the window's last W of them), reading blocks through the block
// tables; positions before a window are never read (their blocks may have
// been released). `scores` holds
// n_heads * sum(pos + 1) floats. out is [T][n_heads * head_dim] f16.
void LaunchPagedAttention(const float* qkv, int64_t row_stride, const AttentionShape& shape,
                          const StepTokensView& step, const KvLayerView& kv, float* scores,
                          __half* out, cudaStream_t stream);

// out[t][i] = f16(silu(gu[t][i]) * gu[t][n_ff + i]).
void LaunchSwiGlu(const float* gate_up, int64_t n_tokens, int n_ff, __half* out,
                  cudaStream_t stream);

// out[t][i] = f16(gelu(gu[t][i]) * gu[t][n_ff + i]), GELU's tanh form (as
// ggml's, which gemma3 uses).
void LaunchGeGlu(const float* gate_up, int64_t n_tokens, int n_ff, __half* out,
                 cudaStream_t stream);

// x += y over n floats.
void LaunchAddInPlace(float* x, const float* y, int64_t n, cudaStream_t stream);

// out[i] = x[rows[i]] for rows of n floats.
void LaunchGatherRows(const float* x, const int32_t* rows, int64_t n_rows, int n, float* out,
                      cudaStream_t stream);

}  // namespace pdserve::cuda

#endif  // PDSERVE_COMMON_GPU_CUDA_LLAMA_KERNELS_H_
