// WindowRelease: the sliding-window layers' side of a sequence's KV blocks
// (Gemma 3's local layers). A window layer reads only the last `window`
// positions, so a decoding sequence's blocks wholly behind its next token's
// window give their window-layer memory back (the pool then holds about a
// window per local layer, whatever the context), and a cached prefix is
// usable only while the window its next token reads is still there.
//
// The engine asks; this unit decides. With no window layer every query is
// a no-op (FirstRead -1, Intact true, HasHoles false, Release nothing).
// Not thread-safe: used from the engine thread, like the engine.
#ifndef PDSERVE_COMMON_ENGINE_WINDOW_RELEASE_H_
#define PDSERVE_COMMON_ENGINE_WINDOW_RELEASE_H_

#include <cstdint>
#include <vector>

#include "common/engine/kv_cache.h"
#include "common/engine/sequence.h"

namespace pdserve {

class WindowRelease {
 public:
  // `cache` must outlive this object.
  explicit WindowRelease(KvCache* cache);

  // Some layer of the cache has a sliding window.
  bool active() const { return max_window_ > 0; }
  // The first position a token at `pos` reads in the window layers: its
  // window start rounded down as the attention kernels read it
  // (KvLayout::kWindowReadAlign). -1 without window layers.
  int32_t FirstRead(int32_t pos) const;
  // A cached run of full blocks can be reused: the blocks the next token's
  // window reads have not given their window layers back.
  bool Intact(const std::vector<int32_t>& prefix) const;
  // A sequence whose prompt KV came over a transfer holds window-layer
  // blocks that were never written (KvLayout::FirstSentBlock): it must not
  // publish them to the prefix cache.
  bool HasHoles(const Sequence& seq) const;
  // Gives back the window-layer memory of the sequence's blocks behind its
  // next token's window. Shared blocks are left alone (another sequence may
  // still read them), and so are prefill workers' sequences (their blocks
  // are being sent) and sequences still reading their prompt.
  void Release(Sequence& seq);

 private:
  KvCache* const cache_;
  // The widest sliding window of the cache's layers (0: none).
  const int32_t max_window_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_WINDOW_RELEASE_H_
