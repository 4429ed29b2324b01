// Causal GQA attention of query rows against K/V held in the paged cache.
//
// Numerics follow llama.cpp's non-flash CPU path so greedy tokens match it:
// q is rounded to f16 before q.k (K is f16), softmax sums in double, and the
// probabilities are rounded to f16 before they weight V. Where
// LlamaExactNumericsActive() (AVX2 or AVX512), the llama_numerics.h kernels
// reproduce that path bit for bit, exp and summation order included;
// elsewhere the portable path below agrees to rounding. An int8 cache
// (KvLayout::is_int8) takes its own path: int8 rows dequantised on the fly
// inside the dot products, see attention.cc.
//
// Stateless apart from per-thread scratch; callers parallelise over
// (query row, head) pairs.
#ifndef PDSERVE_COMMON_CPU_ATTENTION_H_
#define PDSERVE_COMMON_CPU_ATTENTION_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/cpu/llama_numerics.h"
#include "common/engine/kv_cache.h"

namespace pdserve {

struct AttentionShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  // Multiplies q.k before the softmax; 0 means 1 / sqrt(head_dim).
  float kq_scale = 0.0f;

  float KqScale() const {
    return kq_scale > 0.0f ? kq_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  }
};

// One head of one query: attends over positions [lo, n_ctx) of a sequence
// whose blocks are `block_table`, in layer `layer` (lo > 0: a sliding
// window). q and out hold head_dim floats; `scores` is per-thread scratch,
// grown as needed.
void AttendHead(const AttentionShape& shape, int head, const float* q, int n_ctx,
                absl::Span<const int32_t> block_table, KvCache& cache, int layer, float* out,
                std::vector<float>& scores, int lo = 0);

// True when an f16 cache's attention runs the bit-exact llama_numerics.h
// kernels: they are active on this CPU and the head size suits them.
bool UseLlamaNumerics(const AttentionShape& shape, const KvCache& cache);

// Where one KV head's rows of `layer` live, as llama_numerics.h reads them.
KvHeadRows LlamaKvRows(KvCache& cache, int layer, int kv_head, int head_dim,
                       absl::Span<const int32_t> block_table);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_CPU_ATTENTION_H_
