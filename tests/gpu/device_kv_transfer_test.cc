// KV blocks in device memory: the stager's gather/scatter kernels against a
// host reference, and the TCP transport between two device caches on one
// GPU (what a prefill and a decode worker with --device=cuda do today).
// Skips without a CUDA device.
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cuda/cuda_device.h"
#include "common/runtime_factory.h"
#include "common/tcp_kv_receiver.h"
#include "common/tcp_kv_sender.h"
#include "gtest/gtest.h"
#include "tests/unit/kv_test_util.h"

namespace pdserve {
namespace {

using ::pdserve::testing::DoneProbe;

KvLayout SmolLm2Layout() {
  KvLayout l;
  l.n_layers = 30;
  l.n_kv_heads = 3;
  l.head_dim = 64;
  l.block_size = 16;
  return l;
}

class DeviceKvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  std::unique_ptr<KvCache> DeviceCache(int32_t blocks) {
    auto c = CreateKvCache(DeviceSpec{DeviceSpec::Kind::kCuda, 0}, SmolLm2Layout(), blocks);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  // Host image of (layer, block) -> bytes, written into the device cache.
  static std::vector<uint8_t> Fill(KvCache& cache, uint32_t seed) {
    const size_t bb = cache.layout().bytes_per_layer_block();
    std::vector<uint8_t> host(KvCache::PoolBytes(cache.layout(), cache.num_blocks()));
    std::mt19937 rng(seed);
    for (uint8_t& b : host) b = static_cast<uint8_t>(rng());
    std::vector<uint8_t*> all;
    for (int l = 0; l < cache.layout().n_layers; ++l) {
      for (int32_t b = 0; b < cache.num_blocks(); ++b) all.push_back(cache.LayerBlock(l, b));
    }
    EXPECT_TRUE(cache.device_memory()->ScatterFromHost(host.data(), all, bb).ok());
    return host;
  }
  static std::vector<uint8_t> Read(KvCache& cache, int layer, int32_t block) {
    std::vector<uint8_t> out(cache.layout().bytes_per_layer_block());
    const uint8_t* p = cache.LayerBlock(layer, block);
    EXPECT_TRUE(cache.device_memory()->GatherToHost({&p, 1}, out.size(), out.data()).ok());
    return out;
  }
};

TEST_F(DeviceKvTest, GatherAndScatterRoundTripEveryBlock) {
  // 700 blocks x 12 KiB is more than one 8 MiB staging run.
  auto cache = DeviceCache(700);
  ASSERT_NE(cache, nullptr);
  const std::vector<uint8_t> host = Fill(*cache, 5);
  const size_t bb = cache->layout().bytes_per_layer_block();
  std::vector<const uint8_t*> picked;
  std::vector<size_t> offsets;
  for (int32_t b = 699; b >= 0; b -= 3) {
    picked.push_back(cache->LayerBlock(7, b));
    offsets.push_back((static_cast<size_t>(7) * 700 + b) * bb);
  }
  std::vector<uint8_t> packed(picked.size() * bb);
  ASSERT_TRUE(cache->device_memory()->GatherToHost(picked, bb, packed.data()).ok());
  for (size_t i = 0; i < picked.size(); ++i) {
    ASSERT_EQ(std::memcmp(packed.data() + i * bb, host.data() + offsets[i], bb), 0) << i;
  }
}

TEST_F(DeviceKvTest, TcpTransferBetweenDeviceCaches) {
  auto src = DeviceCache(64);
  auto dst = DeviceCache(64);
  ASSERT_NE(src, nullptr);
  ASSERT_NE(dst, nullptr);
  const std::vector<uint8_t> src_host = Fill(*src, 9);
  Fill(*dst, 10);
  TcpKvReceiverOptions ro;
  ro.listen_address = "127.0.0.1:0";
  auto receiver = TcpKvReceiver::Create(dst.get(), ro);
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  auto sender = TcpKvSender::Create();
  ASSERT_TRUE(sender.ok()) << sender.status();
  const std::vector<int32_t> src_blocks = {3, 40, 17, 8};
  const std::vector<int32_t> dst_blocks = {60, 1, 22, 5};
  const int layers = src->layout().n_layers;
  DoneProbe probe;
  ASSERT_TRUE((*receiver)
                  ->Expect(1, 1, dst_blocks, layers, absl::Now() + absl::Seconds(20),
                           probe.Callback())
                  .ok());
  const KvTransferTarget target{absl::StrCat("127.0.0.1:", (*receiver)->port()), 1, 1,
                                absl::Now() + absl::Seconds(20)};
  for (int l = 0; l < layers; ++l) {
    ASSERT_TRUE((*sender)->SendLayer(target, l, {0, 1, 2, 3}, *src, src_blocks).ok());
  }
  ASSERT_TRUE((*sender)->Commit(target, KvCommit{layers, 0, 1}).ok());
  ASSERT_TRUE(probe.Wait().ok());
  const size_t bb = src->layout().bytes_per_layer_block();
  for (int l = 0; l < layers; ++l) {
    for (size_t i = 0; i < src_blocks.size(); ++i) {
      const std::vector<uint8_t> got = Read(*dst, l, dst_blocks[i]);
      const size_t off = (static_cast<size_t>(l) * 64 + src_blocks[i]) * bb;
      ASSERT_EQ(std::memcmp(got.data(), src_host.data() + off, bb), 0) << l << "/" << i;
    }
  }
}

}  // namespace
}  // namespace pdserve
