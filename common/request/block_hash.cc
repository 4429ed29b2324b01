#include "common/request/block_hash.h"

namespace pdserve {
namespace {

// splitmix64's finalizer: a bijection on 64 bits with full avalanche, so
// every input bit of a token reaches every bit of the key.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint64_t ChainBlockKey(uint64_t parent, absl::Span<const int32_t> block_tokens) {
  // The length is mixed in first so that blocks of different sizes never
  // alias; each token is mixed with the running state, so order matters.
  uint64_t h = Mix(parent ^ (0x9e3779b97f4a7c15ULL * (block_tokens.size() + 1)));
  for (int32_t t : block_tokens) h = Mix(h + 0x9e3779b97f4a7c15ULL + static_cast<uint32_t>(t));
  return h;
}

std::vector<uint64_t> FullBlockKeys(absl::Span<const int32_t> tokens, int32_t block_size) {
  std::vector<uint64_t> keys;
  if (block_size <= 0) return keys;
  uint64_t parent = kRootBlockKey;
  for (size_t start = 0; start + block_size <= tokens.size(); start += block_size) {
    parent = ChainBlockKey(parent, tokens.subspan(start, block_size));
    keys.push_back(parent);
  }
  return keys;
}

}  // namespace pdserve
