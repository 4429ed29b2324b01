#include "common/request/block_hash.h"

#include <cstdint>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace pdserve {
namespace {

std::vector<int32_t> Iota(int n, int32_t from = 0) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

TEST(BlockHashTest, OneKeyPerFullBlock) {
  EXPECT_TRUE(FullBlockKeys(Iota(15), 16).empty());
  EXPECT_EQ(FullBlockKeys(Iota(16), 16).size(), 1u);
  EXPECT_EQ(FullBlockKeys(Iota(47), 16).size(), 2u);
  EXPECT_EQ(FullBlockKeys(Iota(48), 16).size(), 3u);
}

TEST(BlockHashTest, KeyIsTheChainOverEveryEarlierBlock) {
  const std::vector<int32_t> t = Iota(48);
  const std::vector<uint64_t> keys = FullBlockKeys(t, 16);
  uint64_t parent = kRootBlockKey;
  for (size_t i = 0; i < keys.size(); ++i) {
    parent = ChainBlockKey(parent, absl::MakeConstSpan(&t[i * 16], 16));
    EXPECT_EQ(keys[i], parent) << i;
  }
}

TEST(BlockHashTest, SharedPrefixSharesKeysAndADifferenceChangesEveryLaterKey) {
  const std::vector<int32_t> a = Iota(64);
  std::vector<int32_t> b = a;
  b[20] = 999;  // in block 1
  const std::vector<uint64_t> ka = FullBlockKeys(a, 16);
  const std::vector<uint64_t> kb = FullBlockKeys(b, 16);
  ASSERT_EQ(ka.size(), 4u);
  EXPECT_EQ(ka[0], kb[0]);
  for (size_t i = 1; i < 4; ++i) EXPECT_NE(ka[i], kb[i]) << i;
  // Same tokens in block 3, different history: a different key.
  EXPECT_NE(ChainBlockKey(ka[2], absl::MakeConstSpan(&a[48], 16)),
            ChainBlockKey(kb[2], absl::MakeConstSpan(&a[48], 16)));
}

TEST(BlockHashTest, OrderAndEveryTokenMatter) {
  std::set<uint64_t> seen;
  const std::vector<int32_t> base = Iota(16, 100);
  seen.insert(ChainBlockKey(kRootBlockKey, base));
  for (int i = 0; i < 16; ++i) {
    std::vector<int32_t> t = base;
    t[i] ^= 1;
    EXPECT_TRUE(seen.insert(ChainBlockKey(kRootBlockKey, t)).second) << "token " << i;
  }
  std::vector<int32_t> swapped = base;
  std::swap(swapped[3], swapped[4]);
  EXPECT_TRUE(seen.insert(ChainBlockKey(kRootBlockKey, swapped)).second);
}

// Keys must agree between processes (workers may publish them), so the
// function has no per-process seed: this value is pinned.
TEST(BlockHashTest, KeysAreStableAcrossProcesses) {
  EXPECT_EQ(ChainBlockKey(kRootBlockKey, Iota(16)), 0xd43ad3e4bf43ef8dULL);
}

}  // namespace
}  // namespace pdserve
