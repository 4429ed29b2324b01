#include <cfloat>

#include "common/gpu/cuda/llama_kernels.h"

namespace pdserve::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kAttnThreads = 128;
// BlockReduce and the warp shuffles assume whole warps.
static_assert(kThreads % 32 == 0 && kAttnThreads % 32 == 0);

// A GEMM input in f16. The CPU path quantises these activations to Q8_0
// blocks with a per-block scale, which holds values up to 65504 * 127; f16
// itself tops out at 65504, where a plain conversion would give inf and the
// GEMM NaNs. Clamping keeps such an outlier (large activations appear in
// some layers of bigger models) a rounding error instead of a poisoned
// sequence. K/V keep the plain conversion: the CPU's f16 KV cache converts
// the same way.
// A NaN stays NaN (fmaxf would turn it into -65504 and hide it).
__device__ __half ToHalfSaturated(float v) {
  constexpr float kHalfMax = 65504.0f;
  return __float2half(isnan(v) ? v : fminf(fmaxf(v, -kHalfMax), kHalfMax));
}

__device__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide reduction; every thread gets the result. `shared` holds one
// float per warp. Must be reached by all threads of the block.
template <bool kMax>
__device__ float BlockReduce(float v, float* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = (blockDim.x + 31) / 32;
  v = kMax ? WarpMax(v) : WarpSum(v);
  __syncthreads();  // `shared` may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float r = lane < warps ? shared[lane] : (kMax ? -FLT_MAX : 0.0f);
  r = kMax ? WarpMax(r) : WarpSum(r);
  return r;
}

__global__ void EmbedKernel(const __half* table, const int32_t* ids, int n_embd, float scale,
                            float* x) {
  const int64_t t = blockIdx.x;
  const __half* row = table + static_cast<int64_t>(ids[t]) * n_embd;
  for (int i = threadIdx.x; i < n_embd; i += blockDim.x) {
    x[t * n_embd + i] = __half2float(row[i]) * scale;
  }
}

__device__ void StoreNormed(float v, __half* out) { *out = ToHalfSaturated(v); }
__device__ void StoreNormed(float v, float* out) { *out = v; }

// One block per row of n: a GEMM input (f16) or, for the post norms, f32.
// x and out may be the same row: every read of it precedes the reduction's
// barrier, every write follows it.
template <typename Out>
__global__ void RmsNormKernel(const float* x, const float* w, int n, float eps, Out* out) {
  __shared__ float shared[32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sum += xr[i] * xr[i];
  sum = BlockReduce<false>(sum, shared);
  const float scale = rsqrtf(sum / n + eps);
  Out* o = out + static_cast<int64_t>(blockIdx.x) * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) StoreNormed((xr[i] * scale) * w[i], &o[i]);
}

// One warp per (token, head): head_dim is at most a few hundred floats.
__global__ void HeadRmsNormKernel(float* rows, int64_t row_stride, int64_t offset, int n_heads,
                                  int head_dim, const float* w, float eps, int64_t n_tokens) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (item >= n_tokens * n_heads) return;  // whole warps leave together
  const int lane = threadIdx.x % 32;
  float* v = rows + (item / n_heads) * row_stride + offset + (item % n_heads) * head_dim;
  float sum = 0.0f;
  for (int i = lane; i < head_dim; i += 32) sum += v[i] * v[i];
  const float scale = rsqrtf(WarpSum(sum) / head_dim + eps);
  for (int i = lane; i < head_dim; i += 32) v[i] = (v[i] * scale) * w[i];
}

__global__ void AddBiasKernel(float* rows, const float* bias, int64_t n_tokens, int width) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n_tokens * width) rows[i] += bias[i % width];
}

// One thread per (token, head, pair).
__global__ void RopeKernel(float* rows, int64_t row_stride, int n_heads, int head_dim,
                           RopeParams rope, const int32_t* positions, int64_t n_tokens) {
  const int half = rope.rope_dim / 2;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_tokens * n_heads * half) return;
  const int pair = static_cast<int>(i % half);
  const int head = static_cast<int>((i / half) % n_heads);
  const int64_t t = i / (static_cast<int64_t>(half) * n_heads);
  const float factor = rope.factors != nullptr ? rope.factors[pair] : 1.0f;
  const float theta = rope.freq_scale *
                      (static_cast<float>(positions[t]) *
                       powf(rope.base, -2.0f * pair / static_cast<float>(rope.rope_dim)) / factor);
  float s, c;
  sincosf(theta, &s, &c);
  float* head_row = rows + t * row_stride + static_cast<int64_t>(head) * head_dim;
  float* a = head_row + (rope.neox ? pair : 2 * pair);
  float* b = a + (rope.neox ? half : 1);
  const float x0 = *a, x1 = *b;
  *a = fmaf(x0, c, -(x1 * s));
  *b = fmaf(x0, s, x1 * c);
}

__global__ void StoreKvKernel(const float* qkv, int64_t row_stride, int64_t k_offset,
                              int64_t v_offset, StepTokensView step, KvLayerView kv) {
  const int64_t t = blockIdx.x;
  const int32_t pos = step.positions[t];
  const int32_t block = step.block_tables[step.table_offsets[t] + pos / kv.block_size];
  __half* k = kv.base + block * kv.block_elems + static_cast<int64_t>(pos % kv.block_size) * kv.kv_dim;
  __half* v = k + static_cast<int64_t>(kv.block_size) * kv.kv_dim;
  const float* row = qkv + t * row_stride;
  for (int i = threadIdx.x; i < kv.kv_dim; i += blockDim.x) {
    k[i] = __float2half(row[k_offset + i]);
    v[i] = __float2half(row[v_offset + i]);
  }
}

__device__ const __half* KvRow(const KvLayerView& kv, const int32_t* table, int j, bool value,
                               int kv_head, int head_dim) {
  const int32_t block = table[j / kv.block_size];
  const __half* k = kv.base + block * kv.block_elems +
                    static_cast<int64_t>(j % kv.block_size) * kv.kv_dim +
                    static_cast<int64_t>(kv_head) * head_dim;
  return value ? k + static_cast<int64_t>(kv.block_size) * kv.kv_dim : k;
}

// One block per (token, head): scores of every key into global scratch,
// softmax, then P·V with the block's threads split into groups over keys.
__global__ void PagedAttentionKernel(const float* qkv, int64_t row_stride, AttentionShape shape,
                                     StepTokensView step, KvLayerView kv, float* scores,
                                     __half* out) {
  extern __shared__ float smem[];  // q [head_dim], then partial sums [groups][head_dim]
  __shared__ float reduce[32];
  const int64_t t = blockIdx.x;
  const int h = blockIdx.y;
  const int dh = shape.head_dim;
  const int kv_head = h / (shape.n_heads / shape.n_kv_heads);
  const int ctx = step.positions[t] + 1;
  // A window's keys are [first, ctx); s keeps its ctx slots, the first unused.
  const int first = shape.window > 0 ? max(0, ctx - shape.window) : 0;
  const int32_t* table = step.block_tables + step.table_offsets[t];
  float* s = scores + step.score_offsets[t] * shape.n_heads + static_cast<int64_t>(h) * ctx;
  float* q = smem;
  for (int d = threadIdx.x; d < dh; d += blockDim.x) {
    q[d] = qkv[t * row_stride + static_cast<int64_t>(h) * dh + d];
  }
  __syncthreads();

  const float scale = shape.scale;
  float local_max = -FLT_MAX;
  for (int j = first + threadIdx.x; j < ctx; j += blockDim.x) {
    const __half* k = KvRow(kv, table, j, false, kv_head, dh);
    float dot = 0.0f;
    for (int d = 0; d < dh; ++d) dot = fmaf(q[d], __half2float(k[d]), dot);
    dot *= scale;
    s[j] = dot;
    local_max = fmaxf(local_max, dot);
  }
  const float m = BlockReduce<true>(local_max, reduce);
  float local_sum = 0.0f;
  for (int j = first + threadIdx.x; j < ctx; j += blockDim.x) {
    const float e = __expf(s[j] - m);
    s[j] = e;
    local_sum += e;
  }
  const float l = BlockReduce<false>(local_sum, reduce);  // its barrier publishes s[]

  const int groups = dh <= blockDim.x ? blockDim.x / dh : 1;
  const int g = threadIdx.x / dh;
  float* partial = smem + dh;
  if (g < groups) {
    for (int d = threadIdx.x % dh; d < dh; d += (groups == 1 ? blockDim.x : dh)) {
      float acc = 0.0f;
      for (int j = first + g; j < ctx; j += groups) {
        acc = fmaf(s[j], __half2float(KvRow(kv, table, j, true, kv_head, dh)[d]), acc);
      }
      partial[g * dh + d] = acc;
    }
  }
  __syncthreads();
  for (int d = threadIdx.x; d < dh; d += blockDim.x) {
    float acc = 0.0f;
    for (int gi = 0; gi < groups; ++gi) acc += partial[gi * dh + d];
    out[t * shape.n_heads * dh + static_cast<int64_t>(h) * dh + d] = ToHalfSaturated(acc / l);
  }
}

__global__ void SwiGluKernel(const float* gate_up, int64_t n_tokens, int n_ff, __half* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_tokens * n_ff) return;
  const int64_t t = i / n_ff, c = i % n_ff;
  const float g = gate_up[t * 2 * n_ff + c];
  const float u = gate_up[t * 2 * n_ff + n_ff + c];
  out[i] = ToHalfSaturated(g / (1.0f + __expf(-g)) * u);
}

// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2 / pi) x (1 + 0.044715 x^2))).
__global__ void GeGluKernel(const float* gate_up, int64_t n_tokens, int n_ff, __half* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_tokens * n_ff) return;
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  const int64_t t = i / n_ff, c = i % n_ff;
  const float g = gate_up[t * 2 * n_ff + c];
  const float u = gate_up[t * 2 * n_ff + n_ff + c];
  const float gelu = 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * g * (1.0f + 0.044715f * g * g)));
  out[i] = ToHalfSaturated(gelu * u);
}

__global__ void AddKernel(float* x, const float* y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}

__global__ void GatherRowsKernel(const float* x, const int32_t* rows, int n, float* out) {
  const float* src = x + static_cast<int64_t>(rows[blockIdx.x]) * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[static_cast<int64_t>(blockIdx.x) * n + i] = src[i];
}

unsigned Blocks(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

void LaunchEmbed(const __half* table, const int32_t* ids, int64_t n_tokens, int n_embd,
                 float scale, float* x, cudaStream_t stream) {
  if (n_tokens == 0) return;
  EmbedKernel<<<static_cast<unsigned>(n_tokens), kThreads, 0, stream>>>(table, ids, n_embd, scale,
                                                                        x);
}

void LaunchRmsNorm(const float* x, const float* w, int64_t rows, int n, float eps, __half* out,
                   cudaStream_t stream) {
  if (rows == 0) return;
  RmsNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, w, n, eps, out);
}

void LaunchRmsNormF32(const float* x, const float* w, int64_t rows, int n, float eps, float* out,
                      cudaStream_t stream) {
  if (rows == 0) return;
  RmsNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, w, n, eps, out);
}

void LaunchHeadRmsNorm(float* rows, int64_t row_stride, int64_t offset, int n_heads,
                       int head_dim, const float* w, float eps, int64_t n_tokens,
                       cudaStream_t stream) {
  const int64_t items = n_tokens * n_heads;
  if (items == 0) return;
  constexpr int kWarps = kThreads / 32;
  HeadRmsNormKernel<<<Blocks(items, kWarps), kThreads, 0, stream>>>(
      rows, row_stride, offset, n_heads, head_dim, w, eps, n_tokens);
}

void LaunchAddBias(float* rows, const float* bias, int64_t n_tokens, int width,
                   cudaStream_t stream) {
  const int64_t n = n_tokens * width;
  if (n == 0) return;
  AddBiasKernel<<<Blocks(n, kThreads), kThreads, 0, stream>>>(rows, bias, n_tokens, width);
}

void LaunchRope(float* rows, int64_t row_stride, int n_heads, int head_dim, const RopeParams& rope,
                const StepTokensView& step, cudaStream_t stream) {
  const int64_t work = step.n_tokens * n_heads * (rope.rope_dim / 2);
  if (work == 0) return;
  RopeKernel<<<Blocks(work, kThreads), kThreads, 0, stream>>>(rows, row_stride, n_heads, head_dim,
                                                              rope, step.positions, step.n_tokens);
}

void LaunchStoreKv(const float* qkv, int64_t row_stride, int64_t k_offset, int64_t v_offset,
                   const StepTokensView& step, const KvLayerView& kv, cudaStream_t stream) {
  if (step.n_tokens == 0) return;
  StoreKvKernel<<<static_cast<unsigned>(step.n_tokens), kThreads, 0, stream>>>(
      qkv, row_stride, k_offset, v_offset, step, kv);
}

void LaunchPagedAttention(const float* qkv, int64_t row_stride, const AttentionShape& shape,
                          const StepTokensView& step, const KvLayerView& kv, float* scores,
                          __half* out, cudaStream_t stream) {
  if (step.n_tokens == 0) return;
  const int groups = shape.head_dim <= kAttnThreads ? kAttnThreads / shape.head_dim : 1;
  const size_t smem = sizeof(float) * shape.head_dim * (1 + groups);
  const dim3 grid(static_cast<unsigned>(step.n_tokens), static_cast<unsigned>(shape.n_heads));
  PagedAttentionKernel<<<grid, kAttnThreads, smem, stream>>>(qkv, row_stride, shape, step, kv,
                                                             scores, out);
}

void LaunchSwiGlu(const float* gate_up, int64_t n_tokens, int n_ff, __half* out,
                  cudaStream_t stream) {
  const int64_t n = n_tokens * n_ff;
  if (n == 0) return;
  SwiGluKernel<<<Blocks(n, kThreads), kThreads, 0, stream>>>(gate_up, n_tokens, n_ff, out);
}

void LaunchGeGlu(const float* gate_up, int64_t n_tokens, int n_ff, __half* out,
                 cudaStream_t stream) {
  const int64_t n = n_tokens * n_ff;
  if (n == 0) return;
  GeGluKernel<<<Blocks(n, kThreads), kThreads, 0, stream>>>(gate_up, n_tokens, n_ff, out);
}

void LaunchAddInPlace(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  AddKernel<<<Blocks(n, kThreads), kThreads, 0, stream>>>(x, y, n);
}

void LaunchGatherRows(const float* x, const int32_t* rows, int64_t n_rows, int n, float* out,
                      cudaStream_t stream) {
  if (n_rows == 0) return;
  GatherRowsKernel<<<static_cast<unsigned>(n_rows), kThreads, 0, stream>>>(x, rows, n, out);
}

}  // namespace pdserve::cuda
