#include "common/attention.h"

#include <cmath>

#include "common/half.h"
#include "common/llama_numerics.h"
#include "common/quant/kernels.h"

namespace pdserve {

void AttendHead(const AttentionShape& shape, int head, const float* q, int n_ctx,
                absl::Span<const int32_t> block_table, KvCache& cache, int layer, float* out,
                std::vector<float>& scores) {
  const AttentionKernels& k = GetAttentionKernels();
  const int dh = shape.head_dim;
  const int kv_head = head / (shape.n_heads / shape.n_kv_heads);
  const int64_t kv_dim = cache.layout().kv_dim();
  const int bs = cache.layout().block_size;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));

  uint16_t qh[512];
  k.to_f16(q, qh, dh);
  if (dh % 16 == 0 && LlamaExactNumericsActive()) {
    const int64_t need = LlamaAttendScratchFloats(dh, n_ctx);
    if (static_cast<int64_t>(scores.size()) < need) scores.resize(need);
    const uint16_t* k0 = cache.K(layer, 0);
    const KvHeadRows rows{k0 + kv_head * dh,
                          block_table.data(),
                          cache.layout().bytes_per_layer_block() / 2,
                          cache.V(layer, 0) - k0,
                          kv_dim,
                          bs};
    LlamaAttendHead(qh, dh, scale, n_ctx, rows, scores.data(), out);
    return;
  }
  float q16[512];
  for (int i = 0; i < dh; ++i) q16[i] = F16ToF32(qh[i]);

  if (static_cast<int>(scores.size()) < n_ctx) scores.resize(n_ctx);
  float max_score = -INFINITY;
  for (int j = 0; j < n_ctx; ++j) {
    const uint16_t* kr = cache.K(layer, block_table[j / bs]) + (j % bs) * kv_dim + kv_head * dh;
    const float s = k.dot_f16(kr, q16, dh) * scale;
    scores[j] = s;
    max_score = std::max(max_score, s);
  }
  double sum = 0.0;
  for (int j = 0; j < n_ctx; ++j) {
    const float e = std::exp(scores[j] - max_score);
    scores[j] = e;
    sum += e;
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int i = 0; i < dh; ++i) out[i] = 0.0f;
  for (int j = 0; j < n_ctx; ++j) {
    const float p = RoundThroughF16(scores[j] * inv);
    if (p == 0.0f) continue;
    const uint16_t* vr = cache.V(layer, block_table[j / bs]) + (j % bs) * kv_dim + kv_head * dh;
    k.axpy_f16(p, vr, out, dh);
  }
}

}  // namespace pdserve
