#include "common/engine/window_release.h"

#include <algorithm>

namespace pdserve {
namespace {

int32_t MaxWindow(const KvLayout& layout) {
  if (layout.layer_window.empty()) return 0;
  return *std::max_element(layout.layer_window.begin(), layout.layer_window.end());
}

}  // namespace

WindowRelease::WindowRelease(KvCache* cache)
    : cache_(cache), max_window_(MaxWindow(cache->layout())) {}

int32_t WindowRelease::FirstRead(int32_t pos) const {
  if (max_window_ <= 0) return -1;
  const int32_t align = KvLayout::kWindowReadAlign;
  return std::max(0, pos - max_window_ + 1) / align * align;
}

bool WindowRelease::Intact(const std::vector<int32_t>& prefix) const {
  const auto n = static_cast<int32_t>(prefix.size());
  const int32_t from = FirstRead(n * cache_->layout().block_size);
  if (from < 0) return true;
  for (int32_t b = from / cache_->layout().block_size; b < n; ++b) {
    if (cache_->allocator().window_released(prefix[b])) return false;
  }
  return true;
}

// A transfer sends a window layer's blocks from KvLayout::FirstSentBlock
// on; the ones before it that this sequence did not already hold (its
// cached prefix) were never written.
bool WindowRelease::HasHoles(const Sequence& seq) const {
  const KvLayout& layout = cache_->layout();
  const int32_t n_blocks = BlocksForTokens(seq.prompt_len(), layout.block_size);
  const int32_t held = seq.cached_tokens / layout.block_size;
  for (int l = 0; l < layout.n_layers && !layout.layer_window.empty(); ++l) {
    if (layout.FirstSentBlock(l, n_blocks) > held) return true;
  }
  return false;
}

// Decoding moves every window forward: blocks wholly before the next
// token's window are never read again by this sequence's window layers.
void WindowRelease::Release(Sequence& seq) {
  if (max_window_ <= 0 || seq.options.hold_kv_on_finish || seq.num_computed < seq.prompt_len()) {
    return;
  }
  const int32_t frontier = FirstRead(seq.num_computed) / cache_->layout().block_size;
  BlockAllocator& allocator = cache_->allocator();
  for (; seq.window_released_blocks < frontier; ++seq.window_released_blocks) {
    const int32_t block = seq.blocks[seq.window_released_blocks];
    if (allocator.refcount(block) != 1 || allocator.window_released(block)) continue;
    allocator.MarkWindowReleased(block, cache_->ReleaseWindowLayers(block));
  }
}

}  // namespace pdserve
