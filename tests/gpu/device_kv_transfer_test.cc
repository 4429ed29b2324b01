// KV blocks in device memory: the stager's gather/scatter kernels against a
// host reference, the TCP transport between two device caches on one GPU,
// CUDA IPC between two processes on one GPU (the test binary re-runs itself
// as the prefill side), and the nccl path between two GPUs (skipped on a
// one-GPU machine: NCCL refuses two ranks on one device). Skips without a
// CUDA device.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/gpu/cuda/cuda_device.h"
#include "common/kv/framed_kv_receiver.h"
#include "common/kv/framed_kv_sender.h"
#include "common/runtime/runtime_factory.h"
#include "gtest/gtest.h"
#include "tests/gpu/gpu_test_env.h"
#include "tests/testing/kv_test_util.h"

namespace pdserve {
namespace {

using ::pdserve::testing::DoneProbe;

extern "C" char** environ;

// The child process of the CUDA IPC test reads its receiver from here.
constexpr char kIpcEndpointEnv[] = "PDSERVE_TEST_IPC_ENDPOINT";
constexpr int32_t kIpcPoolBlocks = 64;
constexpr uint32_t kIpcSeed = 21;
const std::vector<int32_t>& IpcSrcBlocks() {
  static const std::vector<int32_t> b = {5, 63, 0, 31, 12};
  return b;
}
const std::vector<int32_t>& IpcDstBlocks() {
  static const std::vector<int32_t> b = {2, 9, 40, 17, 63};
  return b;
}

class DeviceKvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::NoGpu()) GTEST_SKIP() << "no CUDA device";
  }
  std::unique_ptr<KvCache> DeviceCache(int32_t blocks) {
    auto c = CreateKvCache(DeviceSpec{DeviceSpec::Kind::kCuda, 0}, KvLayout::SmolLm2(), blocks);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  // Host image of (layer, block) -> bytes, written into the device cache.
  static std::vector<uint8_t> Fill(KvCache& cache, uint32_t seed) {
    const size_t bb = cache.layout().bytes_per_layer_block();
    std::vector<uint8_t> host(KvCache::PoolBytes(cache.layout(), cache.num_ids()));
    std::mt19937 rng(seed);
    for (uint8_t& b : host) b = static_cast<uint8_t>(rng());
    std::vector<uint8_t*> all;
    for (int l = 0; l < cache.layout().n_layers; ++l) {
      for (int32_t b = 0; b < cache.num_ids(); ++b) all.push_back(cache.LayerBlock(l, b));
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
  FramedKvReceiverOptions ro;
  ro.listen_address = "127.0.0.1:0";
  auto receiver = FramedKvReceiver::Create(dst.get(), ro);
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  auto sender = FramedKvSender::Create();
  ASSERT_TRUE(sender.ok()) << sender.status();
  const std::vector<int32_t> src_blocks = {3, 40, 17, 8};
  const std::vector<int32_t> dst_blocks = {60, 1, 22, 5};
  const int layers = src->layout().n_layers;
  DoneProbe probe;
  ASSERT_TRUE(
      (*receiver)
          ->Expect(1, 1, dst_blocks, layers, absl::Now() + absl::Seconds(20), probe.Callback())
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

// Runs `filter` of this test binary in a child process with `env` added;
// returns its exit status (0 = the child's tests passed).
int RunChild(const std::string& filter, const std::string& env) {
  std::string self(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (n <= 0) return -1;
  self.resize(n);
  std::string filter_flag = "--gtest_filter=" + filter;
  std::vector<char*> argv = {self.data(), filter_flag.data(), nullptr};
  std::vector<std::string> env_text = {env};
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(env_text[0].data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), envp.data()) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The prefill side of the two-process test: attaches its device pool over
// CUDA IPC and sends every layer of IpcSrcBlocks(). Skipped unless the parent
// test started this process.
TEST_F(DeviceKvTest, CudaIpcChildSendsItsPool) {
  const char* endpoint = std::getenv(kIpcEndpointEnv);
  if (endpoint == nullptr) GTEST_SKIP() << "run by CudaIpcBetweenTwoProcesses";
  auto src = DeviceCache(kIpcPoolBlocks);
  ASSERT_NE(src, nullptr);
  Fill(*src, kIpcSeed);
  FramedKvSenderOptions so;
  so.device_pool = src.get();
  auto sender = FramedKvSender::Create(so);
  ASSERT_TRUE(sender.ok()) << sender.status();
  KvTransferTarget target{endpoint, 7, 1, absl::Now() + absl::Seconds(30)};
  target.path = KvPath::kCudaIpc;
  std::vector<int32_t> logical(IpcSrcBlocks().size());
  for (size_t i = 0; i < logical.size(); ++i) logical[i] = static_cast<int32_t>(i);
  const int layers = src->layout().n_layers;
  for (int l = 0; l < layers; ++l) {
    ASSERT_TRUE((*sender)->SendLayer(target, l, logical, *src, IpcSrcBlocks()).ok());
  }
  // D pulls from our pool before it acknowledges, so the pool stays mapped
  // until Commit returns.
  ASSERT_TRUE((*sender)->Commit(target, KvCommit{layers, 0, 1}).ok());
}

TEST_F(DeviceKvTest, CudaIpcBetweenTwoProcesses) {
  auto dst = DeviceCache(kIpcPoolBlocks);
  ASSERT_NE(dst, nullptr);
  Fill(*dst, kIpcSeed + 1);
  FramedKvReceiverOptions ro;
  ro.listen_address = "127.0.0.1:0";
  auto receiver = FramedKvReceiver::Create(dst.get(), ro);
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  const int layers = dst->layout().n_layers;
  DoneProbe probe;
  ASSERT_TRUE(
      (*receiver)
          ->Expect(7, 1, IpcDstBlocks(), layers, absl::Now() + absl::Seconds(60), probe.Callback())
          .ok());
  const std::string env = absl::StrCat(kIpcEndpointEnv, "=127.0.0.1:", (*receiver)->port());
  ASSERT_EQ(RunChild("DeviceKvTest.CudaIpcChildSendsItsPool", env), 0);
  absl::StatusOr<KvCommit> done = probe.Wait();
  ASSERT_TRUE(done.ok()) << done.status();
  // The child filled its pool from the same seed; rebuild that image here.
  std::vector<uint8_t> src_host(KvCache::PoolBytes(dst->layout(), kIpcPoolBlocks));
  std::mt19937 rng(kIpcSeed);
  for (uint8_t& b : src_host) b = static_cast<uint8_t>(rng());
  const size_t bb = dst->layout().bytes_per_layer_block();
  for (int l = 0; l < layers; ++l) {
    for (size_t i = 0; i < IpcSrcBlocks().size(); ++i) {
      const std::vector<uint8_t> got = Read(*dst, l, IpcDstBlocks()[i]);
      const size_t off = (static_cast<size_t>(l) * kIpcPoolBlocks + IpcSrcBlocks()[i]) * bb;
      ASSERT_EQ(std::memcmp(got.data(), src_host.data() + off, bb), 0) << l << "/" << i;
    }
  }
  std::printf("GPU_CHECK cuda_ipc two_process blocks=%zu layers=%d ok\n", IpcSrcBlocks().size(),
              layers);
}

// The nccl path end to end on the real channel: P's cache on GPU 1, D's on
// GPU 0, headers over TCP, bytes over a two-rank NCCL communicator. Two
// transfers, so the second reuses the pair built (and warmed up) by the
// first.
TEST_F(DeviceKvTest, NcclBetweenTwoGpus) {
  if (cuda::DeviceCount() < 2) GTEST_SKIP() << "needs two GPUs";
  auto src_or = CreateKvCache(DeviceSpec{DeviceSpec::Kind::kCuda, 1}, KvLayout::SmolLm2(), 64);
  ASSERT_TRUE(src_or.ok()) << src_or.status();
  std::unique_ptr<KvCache> src = std::move(*src_or);
  if (!src->device_memory()->SupportsPeerChannels()) GTEST_SKIP() << "built without NCCL";
  auto dst = DeviceCache(64);
  ASSERT_NE(dst, nullptr);
  const std::vector<uint8_t> src_host = Fill(*src, 31);
  Fill(*dst, 32);
  FramedKvReceiverOptions ro;
  ro.listen_address = "127.0.0.1:0";
  ro.idle_timeout = absl::Seconds(60);  // the first join sets NCCL up
  auto receiver = FramedKvReceiver::Create(dst.get(), ro);
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  FramedKvSenderOptions so;
  so.device_pool = src.get();
  so.connect_timeout = absl::Seconds(60);
  auto sender = FramedKvSender::Create(so);
  ASSERT_TRUE(sender.ok()) << sender.status();
  const int layers = src->layout().n_layers;
  const size_t bb = src->layout().bytes_per_layer_block();
  const std::vector<std::vector<int32_t>> src_blocks = {{3, 40, 17}, {63, 0}};
  const std::vector<std::vector<int32_t>> dst_blocks = {{10, 11, 12}, {20, 21}};
  for (size_t t = 0; t < src_blocks.size(); ++t) {
    const uint64_t id = 100 + t;
    DoneProbe probe;
    ASSERT_TRUE((*receiver)
                    ->Expect(id, 1, dst_blocks[t], layers, absl::Now() + absl::Seconds(90),
                             probe.Callback())
                    .ok());
    KvTransferTarget target{absl::StrCat("127.0.0.1:", (*receiver)->port()), id, 1,
                            absl::Now() + absl::Seconds(90)};
    target.path = KvPath::kNccl;
    std::vector<int32_t> logical(src_blocks[t].size());
    for (size_t i = 0; i < logical.size(); ++i) logical[i] = static_cast<int32_t>(i);
    for (int l = 0; l < layers; ++l) {
      const absl::Status st = (*sender)->SendLayer(target, l, logical, *src, src_blocks[t]);
      ASSERT_TRUE(st.ok()) << st;
    }
    const absl::Status committed = (*sender)->Commit(target, KvCommit{layers, 0, 1});
    ASSERT_TRUE(committed.ok()) << committed;
    absl::StatusOr<KvCommit> done = probe.Wait(absl::Seconds(90));
    ASSERT_TRUE(done.ok()) << done.status();
    for (int l = 0; l < layers; ++l) {
      for (size_t i = 0; i < src_blocks[t].size(); ++i) {
        const std::vector<uint8_t> got = Read(*dst, l, dst_blocks[t][i]);
        const size_t off = (static_cast<size_t>(l) * 64 + src_blocks[t][i]) * bb;
        ASSERT_EQ(std::memcmp(got.data(), src_host.data() + off, bb), 0) << t << "/" << l;
      }
    }
  }
  std::printf("GPU_CHECK nccl two_gpu transfers=%zu ok\n", src_blocks.size());
}

}  // namespace
}  // namespace pdserve
