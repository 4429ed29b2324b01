// The decode scheduler: which sequences the next engine step runs, and how
// many tokens of each. Decode tokens go first (they are latency-critical and
// cost one token each), then prefill chunks in admission order until the
// token budget is spent. A pure function of the sequences and the limits, so
// Engine::Step and the tests share one policy.
#ifndef PDSERVE_COMMON_ENGINE_SCHEDULER_H_
#define PDSERVE_COMMON_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "common/engine/sequence.h"

namespace pdserve {

struct SchedulerLimits {
  int32_t max_batch_tokens = 512;  // tokens per step
  int32_t max_running = 64;        // sequences per step
  // Prompt tokens per step while any sequence decodes (0: no extra cap).
  int32_t max_prefill_tokens_while_decoding = 0;
};

// One member of the next step's batch: a decode token (with its draft, if
// it has one) or a prefill chunk.
struct ScheduledSlot {
  Sequence* seq;
  int32_t n_tokens;
};

// `sequences` in admission order (the engine's map, keyed by id).
std::vector<ScheduledSlot> ScheduleStep(
    const std::map<int64_t, std::unique_ptr<Sequence>>& sequences, const SchedulerLimits& limits);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_SCHEDULER_H_
