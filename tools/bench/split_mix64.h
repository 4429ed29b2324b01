// SplitMix64: a tiny, well-mixed generator whose output does not depend on
// the standard library, so the bench's prompts are identical on every
// platform and for every server compared.
//
// Thread-safety: not thread-safe; make one per stream.
#ifndef PDSERVE_TOOLS_BENCH_SPLIT_MIX64_H_
#define PDSERVE_TOOLS_BENCH_SPLIT_MIX64_H_

#include <cstdint>

namespace pdserve {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi]; the modulo bias is negligible for our ranges.
  int Between(int lo, int hi) {
    return lo + static_cast<int>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_SPLIT_MIX64_H_
