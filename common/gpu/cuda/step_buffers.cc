#include "common/gpu/cuda/step_buffers.h"

#include <cuda_fp16.h>

#include <algorithm>

#include "common/base/status_macros.h"

namespace pdserve::cuda {

absl::Status StepBuffers::Reserve(const ModelConfig& c, int64_t tokens, int64_t rows,
                                  int64_t score_floats) {
  const int64_t qkv_width = c.q_dim() + 2 * c.kv_dim();
  const int64_t h_width = std::max<int64_t>({c.n_embd, c.q_dim(), c.n_ff});
  const int64_t n = std::max(tokens, rows);
  RETURN_IF_ERROR(x.Reserve(tokens * c.n_embd * sizeof(float)));
  RETURN_IF_ERROR(y.Reserve(n * c.n_embd * sizeof(float)));
  RETURN_IF_ERROR(h.Reserve(n * h_width * sizeof(__half)));
  RETURN_IF_ERROR(qkv.Reserve(tokens * qkv_width * sizeof(float)));
  RETURN_IF_ERROR(gate_up.Reserve(tokens * 2 * c.n_ff * sizeof(float)));
  RETURN_IF_ERROR(attn.Reserve(tokens * c.q_dim() * sizeof(__half)));
  RETURN_IF_ERROR(scores.Reserve(std::max<int64_t>(1, score_floats) * sizeof(float)));
  RETURN_IF_ERROR(logits.Reserve(std::max<int64_t>(1, rows) * c.n_vocab * sizeof(float)));
  return absl::OkStatus();
}

void StepMeta::Build(const ForwardBatch& batch) {
  ids.clear(), positions.clear(), table_offsets.clear(), tables.clear(), logit_rows.clear();
  score_offsets.clear();
  total_scores = 0;
  for (const SequenceChunk& ch : batch.chunks) {
    const int32_t table_offset = static_cast<int32_t>(tables.size());
    tables.insert(tables.end(), ch.block_table.begin(), ch.block_table.end());
    for (size_t i = 0; i < ch.tokens.size(); ++i) {
      const int32_t pos = ch.start_pos + static_cast<int32_t>(i);
      ids.push_back(ch.tokens[i]);
      positions.push_back(pos);
      table_offsets.push_back(table_offset);
      score_offsets.push_back(total_scores);
      total_scores += pos + 1;
    }
    if (!ch.want_logits) continue;
    const auto end = static_cast<int32_t>(ids.size());
    for (int32_t r = end - ch.logit_rows; r < end; ++r) logit_rows.push_back(r);
  }
}

}  // namespace pdserve::cuda
