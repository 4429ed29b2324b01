#include "router/placement/prefix_hit.h"

#include <algorithm>

#include "common/request/block_hash.h"

namespace pdserve::router {

int32_t PrefixHitTokens(const v1::LoadReport& load, absl::Span<const uint64_t> prompt_keys,
                        int32_t block_size) {
  const auto& held = load.cached_block_keys();
  if (held.empty() || block_size <= 0) return 0;
  for (size_t i = prompt_keys.size(); i > 0; --i) {
    if (std::binary_search(held.begin(), held.end(), prompt_keys[i - 1])) {
      return static_cast<int32_t>(i) * block_size;
    }
  }
  return 0;
}

int32_t PromptKeys::HitTokens(const WorkerState& worker) {
  const int32_t block_size = static_cast<int32_t>(worker.info.kv_layout().block_size());
  if (block_size <= 0 || worker.load.cached_block_keys().empty()) return 0;
  if (block_size != block_size_) {
    keys_ = FullBlockKeys(prompt_, block_size);
    block_size_ = block_size;
  }
  return PrefixHitTokens(worker.load, keys_, block_size);
}

}  // namespace pdserve::router
