#include "common/engine/model_runner.h"

#include "absl/strings/str_cat.h"

namespace pdserve {

absl::Status ValidateBatch(const ForwardBatch& batch, const ModelConfig& config,
                           const KvCache& cache) {
  const KvLayout& l = cache.layout();
  // Runners index the pool by the model's shape: a cache of another shape
  // would send them past its end.
  if (l.n_layers != config.n_layers || l.n_kv_heads != config.n_kv_heads ||
      l.head_dim != config.head_dim) {
    return absl::FailedPreconditionError(
        absl::StrCat("forward: the KV cache (", l.DebugString(), ") does not fit the model (",
                     config.n_layers, " layers, ", config.n_kv_heads, " kv heads of ",
                     config.head_dim, ")"));
  }
  const int32_t bs = l.block_size;
  for (size_t c = 0; c < batch.chunks.size(); ++c) {
    const SequenceChunk& ch = batch.chunks[c];
    if (ch.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("forward: chunk ", c, " has no tokens"));
    }
    for (int32_t t : ch.tokens) {
      if (t < 0 || t >= config.n_vocab) {
        return absl::InvalidArgumentError(
            absl::StrCat("forward: token id ", t, " outside vocabulary [0, ", config.n_vocab, ")"));
      }
    }
    if (ch.want_logits &&
        (ch.logit_rows < 1 || ch.logit_rows > static_cast<int64_t>(ch.tokens.size()))) {
      return absl::InvalidArgumentError(absl::StrCat("forward: chunk ", c, " asks for ",
                                                     ch.logit_rows, " logit rows of ",
                                                     ch.tokens.size(), " tokens"));
    }
    const int64_t end = static_cast<int64_t>(ch.start_pos) + ch.tokens.size();
    if (ch.start_pos < 0 || end > config.context_length) {
      return absl::OutOfRangeError(absl::StrCat("forward: positions [", ch.start_pos, ", ", end,
                                                ") exceed context ", config.context_length));
    }
    if (static_cast<int64_t>(ch.block_table.size()) < BlocksForTokens(end, bs)) {
      return absl::InvalidArgumentError(absl::StrCat("forward: chunk ", c, " block table has ",
                                                     ch.block_table.size(), " blocks for ", end,
                                                     " tokens"));
    }
    for (int32_t b : ch.block_table) {
      if (b < 0 || b >= cache.num_ids()) {
        return absl::InvalidArgumentError(absl::StrCat("forward: block id ", b, " out of range"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace pdserve
