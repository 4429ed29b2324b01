#include "common/matmul.h"

#include "common/quant/kernels.h"

namespace pdserve {
namespace {

// Rows handled per dot-product call (matches the vec_dot4 kernels).
constexpr int64_t kRowGroup = 4;

}  // namespace

const Matmul::QuantizedInput& Matmul::Quantize(uint32_t weight_type, const float* x, int64_t in,
                                               int64_t n_tokens) {
  for (const QuantizedInput& q : inputs_) {
    if (q.weight_type == weight_type) return q;
  }
  QuantizedInput& q = inputs_.emplace_back();
  q.weight_type = weight_type;
  q.row_bytes = ActivationRowBytes(weight_type, in);
  q.data.resize(static_cast<size_t>(q.row_bytes * n_tokens));
  const TypeKernels* k = FindTypeKernels(weight_type);
  uint8_t* out = q.data.data();
  const int64_t row_bytes = q.row_bytes;
  auto quantize_rows = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) k->quantize_act(x + t * in, out + t * row_bytes, in);
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
  int64_t total_rows = 0;
  for (const MatmulJob& j : jobs) {
    Quantize(j.w->type, x, j.w->in, n_tokens);
    total_rows += j.w->out;
  }
  pool_->ParallelFor(total_rows, kRowGroup, [&](int64_t begin, int64_t end) {
    RunRows(jobs, n_tokens, begin, end);
  });
}

// Computes the output rows [row_begin, row_end) of the concatenation of all
// jobs' outputs, for every token.
void Matmul::RunRows(absl::Span<const MatmulJob> jobs, int64_t n_tokens, int64_t row_begin,
                     int64_t row_end) {
  int64_t base = 0;
  for (const MatmulJob& j : jobs) {
    const WeightMatrix& w = *j.w;
    const int64_t lo = std::max(row_begin, base) - base;
    const int64_t hi = std::min(row_end, base + w.out) - base;
    base += w.out;
    if (lo >= hi) continue;
    const TypeKernels* k = FindTypeKernels(w.type);
    const QuantizedInput* in = nullptr;
    for (const QuantizedInput& q : inputs_) {
      if (q.weight_type == w.type) in = &q;
    }
    int64_t r = lo;
    if (k->vec_dot4 != nullptr) {
      float out4[kRowGroup];
      for (; r + kRowGroup <= hi; r += kRowGroup) {
        for (int64_t t = 0; t < n_tokens; ++t) {
          k->vec_dot4(w.in, w.row(r), w.row_bytes, in->data.data() + t * in->row_bytes, out4);
          float* y = j.y + t * w.out + r;
          for (int64_t i = 0; i < kRowGroup; ++i) y[i] = out4[i];
        }
      }
    }
    for (; r < hi; ++r) {
      for (int64_t t = 0; t < n_tokens; ++t) {
        j.y[t * w.out + r] = k->vec_dot(w.in, w.row(r), in->data.data() + t * in->row_bytes);
      }
    }
  }
}

}  // namespace pdserve
