#include "common/cpu/attention_tile.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/cpu/kv_int8.h"
#include "common/cpu/llama_numerics.h"
#include "common/quant/half.h"
#include "common/quant/kernels.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

// Positions weighted into V per kernel call: each row's accumulator stays in
// registers over the span, and the span's V rows stay in L1 across rows.
constexpr int kValueSpan = 32;

void AppendTiles(const ChunkSpan& c, int max_tokens, int heads_per_tile, int n_heads,
                 std::vector<AttentionTile>& out) {
  for (int i = 0; i < c.n_tokens; i += max_tokens) {
    for (int h = 0; h < n_heads; h += heads_per_tile) {
      out.push_back({.first_token = c.first_token + i,
                     .first_pos = c.first_pos + i,
                     .n_tokens = std::min(max_tokens, c.n_tokens - i),
                     .first_head = h,
                     .n_heads = heads_per_tile,
                     .chunk = c.chunk});
    }
  }
}

// The per-position arithmetic of each cache dtype, as AttendHead does it.
// Bind(j) points at position j's K/V rows; the tile loop then scores and
// weights the tile's rows (those that see j: a contiguous run) against them.
class F16Rows {
 public:
  F16Rows(KvCache& cache, int layer, int kv_head, int dh)
      : k_(GetAttentionKernels()),
        cache_(cache),
        layer_(layer),
        dh_(dh),
        kv_dim_(cache.layout().kv_dim()),
        head_off_(static_cast<int64_t>(kv_head) * dh) {}
  // q is rounded through f16 once, as the f16 K it meets.
  void PrepareQuery(const float* q, float* dst) const {
    uint16_t qh[512];
    k_.to_f16(q, qh, dh_);
    for (int i = 0; i < dh_; ++i) dst[i] = F16ToF32(qh[i]);
  }
  // Position j lives in row `row` of cache block `block`.
  void Bind(int32_t block, int row) {
    k_row_ = cache_.K(layer_, block) + row * kv_dim_ + head_off_;
  }
  // dots[r] = q_r . k_j for `rows` consecutive prepared queries.
  void Dot(const float* q, int rows, float* dots) const {
    k_.dot_f16_rows(k_row_, q, dh_, rows, dots);
  }
  static float Exp(float x) { return std::exp(x); }
  // out += sum over j in [j0, j1) of p[j] * v_j, in position order, each p
  // rounded through f16 first; positions whose p rounds to 0 are skipped,
  // as AttendHead skips them.
  void AddValues(const float* p, int j0, int j1, float* out, AttentionScratch& s) const {
    int live = 0;
    for (int j = j0; j < j1; ++j) {
      const float pj = RoundThroughF16(p[j]);
      if (pj == 0.0f) continue;
      s.live_p[live] = pj;
      s.live_v[live++] = cache_.V(layer_, s.pos_block[j]) + s.pos_row[j] * kv_dim_ + head_off_;
    }
    if (live > 0) k_.axpy_f16_seq(s.live_p.data(), s.live_v.data(), live, out, dh_);
  }

 private:
  const AttentionKernels& k_;
  KvCache& cache_;
  const int layer_;
  const int dh_;
  const int64_t kv_dim_;
  const int64_t head_off_;
  const uint16_t* k_row_ = nullptr;
};

// The int8 cache (see AttendHeadInt8 in attention.cc): q stays f32, rows
// carry a scale each, and terms below FLT_MIN are dropped.
class Int8Rows {
 public:
  Int8Rows(KvCache& cache, int layer, int kv_head, int dh)
      : cache_(cache),
        layer_(layer),
        kv_head_(kv_head),
        dh_(dh),
        nkv_(cache.layout().n_kv_heads),
        kv_dim_(cache.layout().kv_dim()) {}
  void PrepareQuery(const float* q, float* dst) const { std::copy_n(q, dh_, dst); }
  void Bind(int32_t block, int row) {
    k_row_ = cache_.K8(layer_, block) + row * kv_dim_ + static_cast<int64_t>(kv_head_) * dh_;
    k_scale_ = cache_.KScales(layer_, block)[row * nkv_ + kv_head_];
  }
  void Dot(const float* q, int rows, float* dots) const {
    for (int r = 0; r < rows; ++r) {
      dots[r] = DotKvInt8(k_row_, q + static_cast<int64_t>(r) * dh_, dh_) * k_scale_;
    }
  }
  static float Exp(float x) {
    constexpr float kMinExpArg = -87.33f;  // exp(x) < FLT_MIN below this
    return x < kMinExpArg ? 0.0f : std::exp(x);
  }
  void AddValues(const float* p, int j0, int j1, float* out, AttentionScratch& s) const {
    for (int j = j0; j < j1; ++j) {
      const int32_t b = s.pos_block[j];
      const int r = s.pos_row[j];
      const float pj = p[j] * cache_.VScales(layer_, b)[r * nkv_ + kv_head_];
      if (std::fabs(pj) < std::numeric_limits<float>::min()) continue;
      AxpyKvInt8(pj, cache_.V8(layer_, b) + r * kv_dim_ + static_cast<int64_t>(kv_head_) * dh_, out,
                 dh_);
    }
  }

 private:
  KvCache& cache_;
  const int layer_;
  const int kv_head_;
  const int dh_;
  const int nkv_;
  const int64_t kv_dim_;
  const int8_t* k_row_ = nullptr;
  float k_scale_ = 0.0f;
};

// AttendHead's arithmetic row by row (scores with a running max, exp and a
// double sum in position order, probabilities weighting V in position
// order); only the loop nest differs: positions outside, the tile's rows
// inside, so each K/V row is read once for the whole tile. Rows are
// token-major, so the rows that see position j are a suffix.
template <typename Rows>
void AttendTileRows(const AttentionShape& shape, const AttentionTile& tile, int window,
                    const float* q, int64_t row_stride, absl::Span<const int32_t> block_table,
                    int block_size, Rows rows_of, float* out, AttentionScratch& s) {
  const int dh = shape.head_dim;
  const float scale = shape.KqScale();
  const int nh = tile.n_heads;
  const int rows = tile.n_tokens * nh;
  const int n_max = tile.first_pos + tile.n_tokens;  // the last token's context
  s.scores.resize(static_cast<size_t>(rows) * n_max);
  s.q.resize(static_cast<size_t>(rows) * dh);
  s.max.assign(rows, -INFINITY);
  s.inv.resize(rows);
  s.row_tmp.resize(rows);
  s.out.resize(rows);
  s.live_p.resize(kValueSpan);
  s.live_v.resize(kValueSpan);
  auto score = [&](int r, int j) -> float& { return s.scores[static_cast<size_t>(r) * n_max + j]; };
  for (int r = 0; r < rows; ++r) {
    const int64_t off = (r / nh) * row_stride + (tile.first_head + r % nh) * dh;
    rows_of.PrepareQuery(q + off, &s.q[static_cast<size_t>(r) * dh]);
    s.out[r] = out + off;
  }
  // Where each position lives, worked out once (no division per position).
  s.pos_block.resize(n_max);
  s.pos_row.resize(n_max);
  for (int j = 0, b = 0; j < n_max; ++b) {
    for (int r = 0; r < block_size && j < n_max; ++r, ++j) {
      s.pos_block[j] = block_table[b];
      s.pos_row[j] = r;
    }
  }
  // Rows [first_row(j), end_row(j)) see position j: those at or after it
  // and, with a window, not past j + window - 1.
  auto first_row = [&](int j) { return std::max(0, j - tile.first_pos) * nh; };
  auto end_row = [&](int j) {
    return window > 0 ? std::min(rows, std::max(0, j + window - tile.first_pos) * nh) : rows;
  };
  auto lo = [&](int r) { return window > 0 ? std::max(0, tile.first_pos + r / nh - window + 1) : 0; };
  for (int j = lo(0); j < n_max; ++j) {
    rows_of.Bind(s.pos_block[j], s.pos_row[j]);
    const int r0 = first_row(j);
    const int r1 = end_row(j);
    rows_of.Dot(&s.q[static_cast<size_t>(r0) * dh], r1 - r0, s.row_tmp.data());
    for (int r = r0; r < r1; ++r) {
      const float sc = s.row_tmp[r - r0] * scale;
      score(r, j) = sc;
      s.max[r] = std::max(s.max[r], sc);
    }
  }
  for (int r = 0; r < rows; ++r) {
    const int n_ctx = tile.first_pos + r / nh + 1;
    double sum = 0.0;
    for (int j = lo(r); j < n_ctx; ++j) {
      const float e = Rows::Exp(score(r, j) - s.max[r]);
      score(r, j) = e;
      sum += e;
    }
    s.inv[r] = static_cast<float>(1.0 / sum);
    std::fill_n(s.out[r], dh, 0.0f);
  }
  for (int j0 = lo(0) / kValueSpan * kValueSpan; j0 < n_max; j0 += kValueSpan) {
    for (int r = first_row(j0); r < end_row(j0 + kValueSpan - 1); ++r) {
      const int n_ctx = tile.first_pos + r / nh + 1;
      const int ja = std::max(j0, lo(r));
      const int j1 = std::min(j0 + kValueSpan, n_ctx);
      if (ja >= j1) continue;
      float* p = &score(r, 0);
      for (int j = ja; j < j1; ++j) p[j] *= s.inv[r];
      rows_of.AddValues(p, ja, j1, s.out[r], s);
    }
  }
}

// The bit-exact kernels take the tile's rows in one call: row r is token
// r / n_heads, head r % n_heads, so the rows' context lengths never fall.
void AttendTileLlama(const AttentionShape& shape, const AttentionTile& tile, int window,
                     const float* q, int64_t row_stride, absl::Span<const int32_t> block_table,
                     KvCache& cache, int layer, float* out, AttentionScratch& s) {
  const int dh = shape.head_dim;
  const int nh = tile.n_heads;
  const int rows = tile.n_tokens * nh;
  const LlamaAttendScratchSize need =
      LlamaAttendScratchNeeded(dh, rows, tile.first_pos + tile.n_tokens);
  if (static_cast<int64_t>(s.scores.size()) < need.floats) s.scores.resize(need.floats);
  if (static_cast<int64_t>(s.offsets.size()) < need.offsets) s.offsets.resize(need.offsets);
  s.q_f16.resize(static_cast<size_t>(rows) * dh);
  s.n_ctx.resize(rows);
  s.lo.resize(rows);
  s.out.resize(rows);
  const AttentionKernels& k = GetAttentionKernels();
  for (int r = 0; r < rows; ++r) {
    const int64_t off = (r / nh) * row_stride + (tile.first_head + r % nh) * dh;
    k.to_f16(q + off, &s.q_f16[static_cast<size_t>(r) * dh], dh);
    s.n_ctx[r] = tile.first_pos + r / nh + 1;
    s.lo[r] = window > 0 ? std::max(0, s.n_ctx[r] - window) : 0;
    s.out[r] = out + off;
  }
  const int kv_head = tile.first_head / (shape.n_heads / shape.n_kv_heads);
  LlamaAttendRows(s.q_f16.data(), rows, s.n_ctx.data(), s.lo.data(), dh, shape.KqScale(),
                  LlamaKvRows(cache, layer, kv_head, dh, block_table), s.scores.data(),
                  s.offsets.data(), s.out.data());
}

}  // namespace

std::vector<AttentionTile> PlanAttentionTiles(const AttentionShape& shape,
                                              absl::Span<const ChunkSpan> chunks, int max_tokens,
                                              int threads) {
  // ModelConfig's shape checks guarantee these; a tile covering heads of two
  // KV heads (or none) would read and write past the rows.
  DCHECK_GT(shape.n_kv_heads, 0);
  DCHECK_EQ(shape.n_heads % shape.n_kv_heads, 0);
  DCHECK_GT(max_tokens, 0);
  const int group = shape.n_heads / shape.n_kv_heads;
  int64_t grouped = 0;
  for (const ChunkSpan& c : chunks) {
    grouped += (c.n_tokens + max_tokens - 1) / max_tokens * shape.n_kv_heads;
  }
  const int heads_per_tile = grouped < threads ? 1 : group;
  std::vector<AttentionTile> tiles;
  for (const ChunkSpan& c : chunks) {
    AppendTiles(c, max_tokens, heads_per_tile, shape.n_heads, tiles);
  }
  std::stable_sort(tiles.begin(), tiles.end(), [](const AttentionTile& a, const AttentionTile& b) {
    return a.cost() > b.cost();
  });
  return tiles;
}

void AttendTile(const AttentionShape& shape, const AttentionTile& tile, int window,
                const float* q, int64_t row_stride, absl::Span<const int32_t> block_table,
                KvCache& cache, int layer, float* out, AttentionScratch& scratch) {
  const int kv_head = tile.first_head / (shape.n_heads / shape.n_kv_heads);
  const int dh = shape.head_dim;
  const int bs = cache.layout().block_size;
  if (cache.layout().is_int8()) {
    AttendTileRows(shape, tile, window, q, row_stride, block_table, bs,
                   Int8Rows(cache, layer, kv_head, dh), out, scratch);
    return;
  }
  if (!UseLlamaNumerics(shape, cache)) {
    AttendTileRows(shape, tile, window, q, row_stride, block_table, bs,
                   F16Rows(cache, layer, kv_head, dh), out, scratch);
    return;
  }
  AttendTileLlama(shape, tile, window, q, row_stride, block_table, cache, layer, out, scratch);
}

}  // namespace pdserve
