#include "common/cpu/attention.h"

#include <cmath>
#include <limits>

#include "common/cpu/kv_int8.h"
#include "common/cpu/llama_numerics.h"
#include "common/quant/half.h"
#include "common/quant/kernels.h"

namespace pdserve {
namespace {

// The int8 cache: no llama.cpp path to match, so q stays f32, each score is
// the int8 row dotted with q times the row's scale, softmax sums in double
// as below, and the probabilities weight V unrounded. Weights that would be
// subnormal floats (below FLT_MIN ~ 1.2e-38, a change of at most 127 * that
// per term) count as zero: subnormal arithmetic costs ~100 cycles an
// operation on x86 and made long-context decode 20x slower. (The f16 path
// gets the same effect from rounding p through f16.)
void AttendHeadInt8(const AttentionShape& shape, int kv_head, const float* q, int lo, int n_ctx,
                    absl::Span<const int32_t> block_table, KvCache& cache, int layer, float* out,
                    std::vector<float>& scores) {
  const int dh = shape.head_dim;
  const int64_t kv_dim = cache.layout().kv_dim();
  const int bs = cache.layout().block_size;
  const int nkv = shape.n_kv_heads;
  const float scale = shape.KqScale();
  if (static_cast<int>(scores.size()) < n_ctx) scores.resize(n_ctx);
  float max_score = -INFINITY;
  for (int j = lo; j < n_ctx; ++j) {
    const int32_t b = block_table[j / bs];
    const int r = j % bs;
    const int8_t* kr = cache.K8(layer, b) + r * kv_dim + kv_head * dh;
    const float s = DotKvInt8(kr, q, dh) * cache.KScales(layer, b)[r * nkv + kv_head] * scale;
    scores[j] = s;
    max_score = std::max(max_score, s);
  }
  // exp(x) < FLT_MIN for x below this.
  constexpr float kMinExpArg = -87.33f;
  double sum = 0.0;
  for (int j = lo; j < n_ctx; ++j) {
    const float x = scores[j] - max_score;
    const float e = x < kMinExpArg ? 0.0f : std::exp(x);
    scores[j] = e;
    sum += e;
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int i = 0; i < dh; ++i) out[i] = 0.0f;
  for (int j = lo; j < n_ctx; ++j) {
    const int32_t b = block_table[j / bs];
    const int r = j % bs;
    const float p = scores[j] * inv * cache.VScales(layer, b)[r * nkv + kv_head];
    if (std::fabs(p) < std::numeric_limits<float>::min()) continue;
    AxpyKvInt8(p, cache.V8(layer, b) + r * kv_dim + kv_head * dh, out, dh);
  }
}

}  // namespace

bool UseLlamaNumerics(const AttentionShape& shape, const KvCache& cache) {
  return !cache.layout().is_int8() && shape.head_dim % 16 == 0 && LlamaExactNumericsActive();
}

KvHeadRows LlamaKvRows(KvCache& cache, int layer, int kv_head, int head_dim,
                       absl::Span<const int32_t> block_table) {
  const uint16_t* k0 = cache.K(layer, 0);
  return {.base = k0 + static_cast<int64_t>(kv_head) * head_dim,
          .block_table = block_table.data(),
          .block_stride = cache.layout().bytes_per_layer_block() / 2,
          .v_offset = cache.V(layer, 0) - k0,
          .row_stride = cache.layout().kv_dim(),
          .block_size = cache.layout().block_size};
}

void AttendHead(const AttentionShape& shape, int head, const float* q, int n_ctx,
                absl::Span<const int32_t> block_table, KvCache& cache, int layer, float* out,
                std::vector<float>& scores, int lo) {
  const int kv_head = head / (shape.n_heads / shape.n_kv_heads);
  if (cache.layout().is_int8()) {
    AttendHeadInt8(shape, kv_head, q, lo, n_ctx, block_table, cache, layer, out, scores);
    return;
  }
  const AttentionKernels& k = GetAttentionKernels();
  const int dh = shape.head_dim;
  const int64_t kv_dim = cache.layout().kv_dim();
  const int bs = cache.layout().block_size;
  const float scale = shape.KqScale();

  uint16_t qh[512];
  k.to_f16(q, qh, dh);
  if (UseLlamaNumerics(shape, cache)) {
    const LlamaAttendScratchSize need = LlamaAttendScratchNeeded(dh, 1, n_ctx);
    if (static_cast<int64_t>(scores.size()) < need.floats) scores.resize(need.floats);
    thread_local std::vector<int64_t> offsets;
    if (static_cast<int64_t>(offsets.size()) < need.offsets) offsets.resize(need.offsets);
    float* const outs[] = {out};
    LlamaAttendRows(qh, 1, &n_ctx, &lo, dh, scale,
                    LlamaKvRows(cache, layer, kv_head, dh, block_table), scores.data(),
                    offsets.data(), outs);
    return;
  }
  float q16[512];
  for (int i = 0; i < dh; ++i) q16[i] = F16ToF32(qh[i]);

  if (static_cast<int>(scores.size()) < n_ctx) scores.resize(n_ctx);
  float max_score = -INFINITY;
  for (int j = lo; j < n_ctx; ++j) {
    const uint16_t* kr = cache.K(layer, block_table[j / bs]) + (j % bs) * kv_dim + kv_head * dh;
    const float s = k.dot_f16(kr, q16, dh) * scale;
    scores[j] = s;
    max_score = std::max(max_score, s);
  }
  double sum = 0.0;
  for (int j = lo; j < n_ctx; ++j) {
    const float e = std::exp(scores[j] - max_score);
    scores[j] = e;
    sum += e;
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int i = 0; i < dh; ++i) out[i] = 0.0f;
  for (int j = lo; j < n_ctx; ++j) {
    const float p = RoundThroughF16(scores[j] * inv);
    if (p == 0.0f) continue;
    const uint16_t* vr = cache.V(layer, block_table[j / bs]) + (j % bs) * kv_dim + kv_head * dh;
    k.axpy_f16(p, vr, out, dh);
  }
}

}  // namespace pdserve
