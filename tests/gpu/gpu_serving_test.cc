// A full disaggregated Generate on one GPU: router, prefill and decode
// processes with --device=cuda:0 on a SmolLM2-shaped random model (the real
// file is too large to carry to the GPU machine), KV over CUDA IPC (auto
// picks it for two GPU workers of one host) and over TCP staged through host
// memory, against the colocated path and the CUDA engine in this process.
// Requests go one at a time, so every path runs the same step shapes and the
// greedy tokens must be identical. Afterwards every pool is back at idle.
// Skips without a CUDA device; PDSERVE_GPU_TEST_DEVICE=cpu runs the same
// steps on the CPU (a dry run of the test itself, KV then over TCP).
#include <cstdlib>
#include <string>
#include <vector>

#include "common/engine/engine.h"
#include "common/gpu/cuda/cuda_device.h"
#include "common/model/model.h"
#include "common/model/random_model.h"
#include "common/runtime/runtime_factory.h"
#include "gtest/gtest.h"
#include "tests/gpu/gpu_test_env.h"
#include "tests/testing/cluster_test_util.h"
#include "tests/testing/file_contents.h"
#include "tests/testing/temp_dir.h"

namespace pdserve {
namespace {

using testing::Generate;
using testing::GenerateOutcome;
using testing::PoolsIdle;
using testing::StartCluster;
using testing::TextRequest;

constexpr int kMaxTokens = 16;
const absl::Duration kTimeout = absl::Seconds(120);

std::vector<v1::GenerateRequest> Requests() {
  std::vector<v1::GenerateRequest> r = {TextRequest("The sea is", kMaxTokens),
                                        TextRequest("Once upon a time, in a city", kMaxTokens)};
  for (v1::GenerateRequest& q : r) q.set_ignore_eos(true);
  return r;
}

bool DryRun() {
  const char* d = std::getenv("PDSERVE_GPU_TEST_DEVICE");
  return d != nullptr && std::string(d) == "cpu";
}

class GpuServingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!DryRun() && testing::NoGpu()) return;
    model_path_ = new std::string(testing::TestTempDir("gpu-serving") + "/model.gguf");
    ASSERT_TRUE(WriteRandomModelGguf(RandomModelSpec::SmolLm2Shapes(), *model_path_).ok());
  }
  void SetUp() override {
    if (!DryRun() && testing::NoGpu()) GTEST_SKIP() << "no CUDA device";
  }
  static std::string Device() { return DryRun() ? "cpu" : "cuda:0"; }

  static LocalClusterOptions Options(bool colocated, const std::string& kv_transport) {
    LocalClusterOptions o;
    o.model = *model_path_;
    o.colocated = colocated;
    o.prefill = colocated ? 0 : 1;
    o.kv_blocks = 512;
    o.extra_worker_flags = {"--device=" + Device()};
    if (!kv_transport.empty()) o.extra_prefill_flags = {"--kv_transport=" + kv_transport};
    return o;
  }

  // Each request's token ids through the cluster, one request at a time.
  static std::vector<std::vector<int32_t>> Serve(const LocalClusterOptions& o,
                                                 const std::string& tag, std::string* log_dir) {
    auto cluster = StartCluster(o, tag);
    EXPECT_NE(cluster, nullptr) << tag;
    if (cluster == nullptr) return {};
    auto stub = testing::RouterStub(cluster->router_address());
    std::vector<std::vector<int32_t>> out;
    for (const v1::GenerateRequest& r : Requests()) {
      const GenerateOutcome g = Generate(*stub, r, kTimeout);
      EXPECT_TRUE(g.status.ok()) << tag << ": " << g.status.error_message();
      EXPECT_EQ(g.ids.size(), static_cast<size_t>(kMaxTokens)) << tag;
      out.push_back(g.ids);
    }
    EXPECT_TRUE(PoolsIdle(*cluster, absl::Seconds(10))) << tag;
    if (log_dir != nullptr) *log_dir = testing::TestTempDir(tag);
    return out;
  }

  // The same requests through the CUDA engine in this process.
  static std::vector<std::vector<int32_t>> InProcess() {
    auto model = Model::Load(*model_path_);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return {};
    auto rt = CreateEngineRuntime(**model, {.device = Device(), .threads = 1, .kv_blocks = 512});
    EXPECT_TRUE(rt.ok()) << rt.status();
    if (!rt.ok()) return {};
    Engine engine(&(*model)->tokenizer(), rt->runner.get(), rt->cache.get(), {});
    std::vector<std::vector<int32_t>> out;
    for (const v1::GenerateRequest& r : Requests()) {
      SequenceOptions so;
      so.prompt = (*model)->tokenizer().Encode(r.text(), true);
      so.max_tokens = r.max_tokens();
      so.ignore_eos = true;
      std::vector<int32_t> ids;
      EXPECT_TRUE(engine
                      .Add(so,
                           [&](const TokenEvent& e) {
                             if (e.token >= 0) ids.push_back(e.token);
                           })
                      .ok());
      while (engine.HasWork()) EXPECT_TRUE(engine.Step().ok());
      out.push_back(ids);
    }
    return out;
  }

  static bool LogMentions(const std::string& path, const std::string& needle) {
    return testing::FileContents(path).find(needle) != std::string::npos;
  }

  static std::string* model_path_;
};

std::string* GpuServingTest::model_path_ = nullptr;

// --kv_memory_fraction: the pool takes that share of what the weights left
// free, in whole blocks (a CUDA-only flag: no dry run).
TEST_F(GpuServingTest, KvMemoryFractionSizesThePoolFromFreeDeviceMemory) {
  if (DryRun()) GTEST_SKIP() << "--kv_memory_fraction is for cuda devices";
  auto model = Model::Load(*model_path_);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<size_t> free_before = cuda::FreeMemory(0);
  ASSERT_TRUE(free_before.ok()) << free_before.status();
  auto rt = CreateEngineRuntime(
      **model, {.device = "cuda:0", .threads = 1, .kv_memory_fraction = 0.25});
  ASSERT_TRUE(rt.ok()) << rt.status();
  const KvLayout layout = KvLayout::ForModel((*model)->config(), 16);
  const int32_t blocks = rt->cache->num_blocks();
  EXPECT_GT(blocks, 1024);  // more than the CPU default on any card
  EXPECT_LE(KvCache::PoolBytes(layout, blocks), *free_before / 4);
  // Whole blocks of a quarter of what was free after the weights: at most
  // one block short of that share.
  EXPECT_GT(KvCache::PoolBytes(layout, blocks + 1) + (size_t{512} << 20), *free_before / 4);
}

TEST_F(GpuServingTest, DisaggregatedColocatedAndInProcessGiveTheSameTokens) {
  std::string ipc_logs;
  const auto ipc = Serve(Options(false, ""), "gpu-disagg-auto", &ipc_logs);
  const auto tcp = Serve(Options(false, "tcp"), "gpu-disagg-tcp", nullptr);
  const auto colocated = Serve(Options(true, ""), "gpu-colocated", nullptr);
  const auto local = InProcess();
  ASSERT_EQ(ipc.size(), Requests().size());
  EXPECT_EQ(ipc, tcp) << "cuda_ipc vs tcp";
  EXPECT_EQ(ipc, colocated) << "disaggregated vs colocated";
  EXPECT_EQ(ipc, local) << "disaggregated vs in-process";
  // auto chose the device-to-device path.
  const std::string path = DryRun() ? "(tcp)" : "(cuda_ipc)";
  EXPECT_TRUE(LogMentions(ipc_logs + "/prefill-0.log", path)) << "see " << ipc_logs;
  std::printf("GPU_CHECK serving disagg_ipc==tcp==colocated==in_process %s\n",
              ipc == tcp && ipc == colocated && ipc == local ? "yes" : "no");
}

}  // namespace
}  // namespace pdserve
