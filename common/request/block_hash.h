// Block hash chain: the prefix-cache key of a full KV block. Block i's key
// covers every token of blocks 0..i — key_i = ChainBlockKey(key_{i-1},
// tokens of block i), with key_{-1} = kRootBlockKey — so two sequences share
// block i's KV exactly when their first (i+1) × block_size tokens agree
// (the K/V of a token depend on every token before it).
//
// The function is fixed (no per-process seed): keys computed by different
// processes for the same tokens are equal, so workers can publish them.
// Pure functions; thread-safe.
#ifndef PDSERVE_COMMON_REQUEST_BLOCK_HASH_H_
#define PDSERVE_COMMON_REQUEST_BLOCK_HASH_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace pdserve {

inline constexpr uint64_t kRootBlockKey = 0x70647365727665ULL;  // "pdserve"

// The key of a block holding `block_tokens` after the prefix keyed `parent`.
uint64_t ChainBlockKey(uint64_t parent, absl::Span<const int32_t> block_tokens);

// Keys of the full blocks of `tokens` (a trailing partial block has none).
std::vector<uint64_t> FullBlockKeys(absl::Span<const int32_t> tokens, int32_t block_size);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_REQUEST_BLOCK_HASH_H_
