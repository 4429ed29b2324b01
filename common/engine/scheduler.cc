#include "common/engine/scheduler.h"

#include <algorithm>

namespace pdserve {

std::vector<ScheduledSlot> ScheduleStep(
    const std::map<int64_t, std::unique_ptr<Sequence>>& sequences, const SchedulerLimits& limits) {
  std::vector<ScheduledSlot> slots;
  int32_t budget = limits.max_batch_tokens;
  auto full = [&] {
    return budget == 0 || static_cast<int32_t>(slots.size()) == limits.max_running;
  };
  for (const auto& [id, seq] : sequences) {
    if (full()) return slots;
    if (!seq->decoding()) continue;
    // Drafts were sized to fit the budget (Engine::PlanDrafts).
    const int32_t n = std::min(budget, 1 + static_cast<int32_t>(seq->draft.size()));
    slots.push_back({seq.get(), n});
    budget -= n;
  }
  // A step is as slow as its prompt tokens: cap them while anyone decodes.
  if (!slots.empty() && limits.max_prefill_tokens_while_decoding > 0) {
    budget = std::min(budget, limits.max_prefill_tokens_while_decoding);
  }
  for (const auto& [id, seq] : sequences) {
    if (full()) return slots;
    if (!seq->prefilling()) continue;
    const int32_t n = std::min(budget, seq->prompt_len() - seq->num_computed);
    slots.push_back({seq.get(), n});
    budget -= n;
  }
  return slots;
}

}  // namespace pdserve
