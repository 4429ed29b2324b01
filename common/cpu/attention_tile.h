// AttentionTile: a unit of attention work that reads a KV head's K/V rows
// once for several query rows: some query heads of one KV head (GQA) for a
// run of consecutive positions of one sequence. Computing each (token, head)
// separately reads the whole context once per row, which made long-context
// prefill and decode bound by K/V traffic (0.5 GB per token at 8k context
// for SmolLM2); a tile of 16 tokens x 3 heads reads it once per 48 rows.
//
// Every row's arithmetic is AttendHead's, in the same order, so tiled and
// untiled attention are bit-identical (tests/unit/cpu/attention_tile_test.cc).
// That holds on all three paths: the f16 cache's portable one, the int8
// cache, and the bit-exact llama.cpp kernels (llama_numerics.h), which take
// a whole tile's rows in one call.
#ifndef PDSERVE_COMMON_CPU_ATTENTION_TILE_H_
#define PDSERVE_COMMON_CPU_ATTENTION_TILE_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/cpu/attention.h"
#include "common/engine/kv_cache.h"

namespace pdserve {

struct AttentionTile {
  int64_t first_token = 0;  // index of the tile's first query row in the step
  int first_pos = 0;        // its position; token i attends [0, first_pos + i]
  int n_tokens = 0;
  int first_head = 0;  // query heads [first_head, first_head + n_heads), one KV head's
  int n_heads = 0;
  int chunk = 0;  // whose block table the tile reads

  // Proportional to the tile's score count, for scheduling.
  int64_t cost() const {
    return static_cast<int64_t>(n_tokens) * n_heads * (first_pos + (n_tokens + 1) / 2);
  }
};

// Per-thread scratch of AttendTile, grown as needed.
struct AttentionScratch {
  std::vector<float> scores;  // [row][position]
  std::vector<float> q;       // [row][head_dim], as the cache's dot products take it
  std::vector<float> max, inv, row_tmp;
  std::vector<int32_t> pos_block, pos_row;  // position j's cache block and row in it
  std::vector<float*> out;                  // each row's output
  // A span's V rows with a probability that is not 0, and those weights.
  std::vector<float> live_p;
  std::vector<const uint16_t*> live_v;
  // The llama_numerics.h path: rows as f16, their context lengths, and the
  // K/V row offsets it works out once per tile.
  std::vector<uint16_t> q_f16;
  std::vector<int> n_ctx, lo;
  std::vector<int64_t> offsets;
};

// A run of `n_tokens` consecutive positions of one sequence chunk.
struct ChunkSpan {
  int chunk = 0;
  int64_t first_token = 0;
  int first_pos = 0;
  int n_tokens = 0;
};

// Cuts every chunk into tiles of up to `max_tokens` tokens and one KV head's
// query heads each; when that leaves fewer tiles than `threads`, splits the
// heads too (one head per tile) so small decode batches still use every
// thread. Sorted by cost, largest first, for greedy scheduling.
std::vector<AttentionTile> PlanAttentionTiles(const AttentionShape& shape,
                                              absl::Span<const ChunkSpan> chunks, int max_tokens,
                                              int threads);

// Attends the tile's rows. q and out hold the step's query rows (and the
// outputs) at `row_stride` floats per token, heads at head_dim each;
// `block_table` is the tile's chunk's. With `window` W > 0 the token at
// position p attends (p - W, p] only, and no position before the first
// row's window (rounded down to 64) is read.
void AttendTile(const AttentionShape& shape, const AttentionTile& tile, int window,
                const float* q, int64_t row_stride, absl::Span<const int32_t> block_table,
                KvCache& cache, int layer, float* out, AttentionScratch& scratch);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_CPU_ATTENTION_TILE_H_
