// The Engine's KV handoff between workers: a prefill worker's sequences
// keep their blocks after they end (hold_kv_on_finish) until the transfer
// is done, and a decode worker's running sequence leaves whole, with its
// blocks, to continue on another decode worker (KV migration). Apart from
// engine.cc so that file is continuous batching only.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/engine/engine.h"

namespace pdserve {

std::vector<int32_t> Engine::TakeHeldBlocks(int64_t seq_id) {
  auto it = held_blocks_.find(seq_id);
  if (it == held_blocks_.end()) return {};
  std::vector<int32_t> blocks = std::move(it->second);
  held_blocks_.erase(it);
  return blocks;
}

void Engine::FreeBlocks(const std::vector<int32_t>& blocks) {
  cache_->allocator().UnrefAll(blocks);
}

std::vector<int32_t> Engine::CancelAndTakeBlocks(int64_t seq_id) {
  if (auto it = sequences_.find(seq_id); it != sequences_.end()) {
    Sequence& seq = *it->second;
    Finish(seq, FinishReason::kCancelled);
    if (!seq.options.hold_kv_on_finish) {  // held here, so ReapFinished frees nothing
      held_blocks_[seq_id] = std::move(seq.blocks);
      seq.blocks.clear();
    }
    ReapFinished();
  }
  return TakeHeldBlocks(seq_id);
}

absl::StatusOr<Engine::Detached> Engine::Detach(int64_t seq_id) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return absl::NotFoundError(absl::StrCat("no sequence ", seq_id));
  Sequence& seq = *it->second;
  // Between steps a decoding sequence's KV covers every token but the last.
  const int32_t len = static_cast<int32_t>(seq.tokens.size());
  if (!seq.running() || seq.generated() < 1 || seq.finish != FinishReason::kNone ||
      seq.num_computed != len - 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("sequence ", seq_id, " is not decoding (", seq.num_computed, " of ", len,
                     " tokens computed)"));
  }
  Detached d;
  d.blocks = std::move(seq.blocks);
  d.kv_tokens = seq.num_computed;
  d.last_token = seq.tokens.back();
  d.generated = seq.options.first_index + seq.generated();
  sequences_.erase(it);
  return d;
}

}  // namespace pdserve
