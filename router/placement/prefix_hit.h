// PrefixHit: how much of a prompt a worker already holds in its prefix
// cache, estimated from the key summary in its load reports
// (LoadReport.cached_block_keys). The router hashes the prompt with the
// workers' own hash chain (common/request/block_hash.h), so keys agree across
// processes; a key names its whole prefix, so the deepest prompt key a
// worker publishes is its hit. The summary is bounded and lags the worker
// by one load report, so the result is an estimate: the worker's Reserved
// (cached_prefix_tokens) is authoritative.
//
// PromptKeys memoises the prompt's keys per block size for one routing
// decision. Not thread-safe (one per decision); PrefixHitTokens is pure.
#ifndef PDSERVE_ROUTER_PLACEMENT_PREFIX_HIT_H_
#define PDSERVE_ROUTER_PLACEMENT_PREFIX_HIT_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "pdserve/v1/worker.pb.h"
#include "router/pool/worker_snapshot.h"

namespace pdserve::router {

// Leading prompt tokens covered by the deepest of `prompt_keys` (the
// prompt's chain keys, FullBlockKeys) found in `load.cached_block_keys`
// (sorted ascending), i.e. (index + 1) * block_size; 0 when none is.
int32_t PrefixHitTokens(const v1::LoadReport& load, absl::Span<const uint64_t> prompt_keys,
                        int32_t block_size);

class PromptKeys {
 public:
  // `prompt` must outlive this object.
  explicit PromptKeys(absl::Span<const int32_t> prompt) : prompt_(prompt) {}

  int32_t size() const { return static_cast<int32_t>(prompt_.size()); }
  // PrefixHitTokens for `worker`, with its block size.
  int32_t HitTokens(const WorkerState& worker);

 private:
  absl::Span<const int32_t> prompt_;
  int32_t block_size_ = 0;  // of keys_
  std::vector<uint64_t> keys_;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_PLACEMENT_PREFIX_HIT_H_
