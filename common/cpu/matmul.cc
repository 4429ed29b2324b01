#include "common/cpu/matmul.h"

#include <algorithm>

#include "common/quant/half.h"
#include "common/quant/quant_blocks.h"

namespace pdserve {
namespace {

// Rows handled per dot-product call (matches the vec_dot4 kernels).
constexpr int64_t kRowGroup = 4;

// The per-block scalars the packed kernels read, for activation row `row`:
// d (and s for Q8_1) as f32, and for a kernel with a slice bias the start of
// each 4-element slice sum, -bias * (sum of the slice's int8 values).
void FillBlockScalars(GgmlType act_type, int32_t bias, const uint8_t* row, int64_t n_blocks,
                      float* d, float* s, int32_t* offsets) {
  if (act_type == GgmlType::kQ8_1) {
    const auto* blk = reinterpret_cast<const BlockQ8_1*>(row);
    for (int64_t b = 0; b < n_blocks; ++b) {
      d[b] = F16ToF32(blk[b].d);
      s[b] = F16ToF32(blk[b].s);
    }
    return;
  }
  const auto* blk = reinterpret_cast<const BlockQ8_0*>(row);
  for (int64_t b = 0; b < n_blocks; ++b) {
    d[b] = F16ToF32(blk[b].d);
    if (bias == 0) continue;
    for (int g = 0; g < kQK / 4; ++g) {
      const int8_t* q = blk[b].qs + 4 * g;
      offsets[b * (kQK / 4) + g] = -bias * (q[0] + q[1] + q[2] + q[3]);
    }
  }
}

}  // namespace

Matmul::QuantizedInput& Matmul::Quantize(uint32_t weight_type, const float* x, int64_t in,
                                         int64_t n_tokens) {
  for (QuantizedInput& q : inputs_) {
    if (q.weight_type == weight_type) return q;
  }
  QuantizedInput& q = inputs_.emplace_back();
  q.weight_type = weight_type;
  q.row_bytes = ActivationRowBytes(weight_type, in);
  q.data.resize(static_cast<size_t>(q.row_bytes * n_tokens));
  const TypeKernels* k = FindTypeKernels(weight_type);
  // Block scalars only exist for the 32-element activation types of packed
  // kernels (the K-quant kernels read their Q8_K blocks as they are).
  const bool scalars = k->packed_gemm != nullptr && k->act_type != GgmlType::kQ8_K;
  const int64_t n_blocks = in / kQK;
  if (scalars) {
    q.d.resize(static_cast<size_t>(n_blocks * n_tokens));
    q.s.resize(q.d.size());
    if (k->packed_slice_bias != 0) q.offsets.resize(q.d.size() * (kQK / 4));
  }
  uint8_t* out = q.data.data();
  const int64_t row_bytes = q.row_bytes;
  auto quantize_rows = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      k->quantize_act(x + t * in, out + t * row_bytes, in);
      if (scalars) {
        const int64_t i = t * n_blocks;
        FillBlockScalars(k->act_type, k->packed_slice_bias, out + t * row_bytes, n_blocks,
                         &q.d[i], &q.s[i], q.offsets.data() + i * (kQK / 4));
      }
    }
  };
  if (n_tokens < 4) {
    quantize_rows(0, n_tokens);
  } else {
    pool_->ParallelFor(n_tokens, 1, quantize_rows);
  }
  return q;
}

void Matmul::Run(absl::Span<const MatmulJob> jobs, const float* x, int64_t n_tokens) {
  inputs_.clear();
  inputs_.reserve(jobs.size());  // plans keep pointers into it
  plans_.clear();
  int64_t total_units = 0;
  for (const MatmulJob& j : jobs) {
    Plan& p = plans_.emplace_back();
    p.job = &j;
    p.kernels = FindTypeKernels(j.w->type);
    p.input = &Quantize(j.w->type, x, j.w->in, n_tokens);
    p.packed = j.packed != nullptr && !j.packed->empty() && p.kernels->packed_gemm != nullptr;
    p.first_unit = total_units;
    p.units = (j.w->out + kPackedRows - 1) / kPackedRows;
    total_units += p.units;
  }
  pool_->ParallelFor(total_units, 1,
                     [&](int64_t begin, int64_t end) { RunUnits(n_tokens, begin, end); });
}

// Computes the row groups [unit_begin, unit_end) of the concatenation of all
// jobs' outputs, for every token.
void Matmul::RunUnits(int64_t n_tokens, int64_t unit_begin, int64_t unit_end) const {
  for (const Plan& p : plans_) {
    const int64_t lo = std::max(unit_begin, p.first_unit) - p.first_unit;
    const int64_t hi = std::min(unit_end, p.first_unit + p.units) - p.first_unit;
    if (lo >= hi) continue;
    if (p.packed) {
      RunPacked(p, n_tokens, lo, hi);
    } else {
      RunRows(p, n_tokens, lo * kPackedRows, std::min(hi * kPackedRows, p.job->w->out));
    }
  }
}

void Matmul::RunPacked(const Plan& p, int64_t n_tokens, int64_t lo, int64_t hi) const {
  const PackedMatrix& w = *p.job->packed;
  const QuantizedInput& in = *p.input;
  PackedGemmArgs args;
  args.w = w.group(lo);
  args.n_groups = hi - lo;
  args.n_rows = std::min(hi * kPackedRows, w.out()) - lo * kPackedRows;
  args.n_blocks = w.n_blocks();
  args.act = in.data.data();
  args.act_stride = in.row_bytes;
  args.act_d = in.d.data();
  args.act_s = in.s.data();
  args.act_offsets = in.offsets.empty() ? nullptr : in.offsets.data();
  args.n_tokens = n_tokens;
  args.y = p.job->y + lo * kPackedRows;
  args.ldy = w.out();
  p.kernels->packed_gemm(args);
}

void Matmul::RunRows(const Plan& p, int64_t n_tokens, int64_t row_begin, int64_t row_end) const {
  const WeightMatrix& w = *p.job->w;
  const TypeKernels* k = p.kernels;
  const QuantizedInput* in = p.input;
  float* y_all = p.job->y;
  int64_t r = row_begin;
  if (k->vec_dot_tokens != nullptr && n_tokens > 1) {
    for (; r < row_end; ++r) {
      k->vec_dot_tokens(w.in, w.row(r), in->data.data(), in->row_bytes, n_tokens, y_all + r, w.out);
    }
    return;
  }
  if (k->vec_dot4 != nullptr) {
    float out4[kRowGroup];
    for (; r + kRowGroup <= row_end; r += kRowGroup) {
      for (int64_t t = 0; t < n_tokens; ++t) {
        k->vec_dot4(w.in, w.row(r), w.row_bytes, in->data.data() + t * in->row_bytes, out4);
        float* y = y_all + t * w.out + r;
        for (int64_t i = 0; i < kRowGroup; ++i) y[i] = out4[i];
      }
    }
  }
  for (; r < row_end; ++r) {
    for (int64_t t = 0; t < n_tokens; ++t) {
      y_all[t * w.out + r] = k->vec_dot(w.in, w.row(r), in->data.data() + t * in->row_bytes);
    }
  }
}

}  // namespace pdserve
