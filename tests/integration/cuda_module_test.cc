// The CUDA module (common/runtime/cuda_module.h) as the real binaries see it, on any
// machine that builds CUDA, GPU or not: CPU workers map none of the CUDA
// libraries; --device=cuda:N makes each binary load the module and resolve
// every symbol it needs from the executable (a missing export would fail the
// load with "undefined symbol"); a module that is missing, stale or not a
// pdserve module is refused with a status that says so.
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/model/random_model.h"
#include "common/runtime/cuda_module_loader.h"
#include "gtest/gtest.h"
#include "tests/testing/cluster_test_util.h"
#include "tests/testing/file_contents.h"
#include "tests/testing/temp_dir.h"

namespace pdserve {
namespace {

using testing::BinDir;
using testing::TestTempDir;

class CudaModuleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_path_ = new std::string(TestTempDir("cuda-module-test") + "/model.gguf");
    ASSERT_TRUE(WriteRandomModelGguf(RandomModelSpec(), *model_path_).ok());
  }
  static void TearDownTestSuite() { delete model_path_; }

  static LocalClusterOptions Cluster(const std::string& tag) {
    LocalClusterOptions o;
    o.bin_dir = BinDir();
    o.model = *model_path_;
    o.log_dir = TestTempDir("cuda-module-" + tag);
    o.kv_blocks = 64;
    o.start_timeout = absl::Seconds(60);
    return o;
  }

  static std::string* model_path_;
};
std::string* CudaModuleTest::model_path_ = nullptr;

// What `command` printed (stdout and stderr) and its exit status.
struct CommandResult {
  int status = -1;
  std::string output;
};
CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  r.status = pclose(pipe);
  return r;
}

// The shared objects mapped into process `pid` whose names hold any of `names`.
std::vector<std::string> MappedLibraries(pid_t pid, const std::vector<std::string>& names) {
  std::vector<std::string> found;  // each once
  std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
  for (std::string line; std::getline(maps, line);) {
    const std::string path = line.substr(line.rfind(' ') + 1);
    if (std::find(found.begin(), found.end(), path) != found.end()) continue;
    for (const std::string& n : names) {
      if (absl::StrContains(path, n)) {
        found.push_back(path);
        break;
      }
    }
  }
  return found;
}

const std::vector<std::string> kCudaLibraries = {"libcublas", "libcudart", "libnccl",
                                                 kCudaModuleFileName};

TEST_F(CudaModuleTest, CpuProcessesMapNoCudaLibrary) {
  auto c = LocalCluster::Start(Cluster("cpu"));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ((*c)->processes().size(), 3u);
  for (const ClusterProcess& p : (*c)->processes()) {
    EXPECT_EQ(MappedLibraries(p.pid, kCudaLibraries), std::vector<std::string>()) << p.name;
  }
}

// Each worker binary, asked for a GPU: on a machine without one it loads the
// module and then fails on the device, on a GPU machine it starts; either
// way the module loaded, so every symbol it takes from that executable is
// exported there.
TEST_F(CudaModuleTest, EveryWorkerBinaryLoadsTheModuleForACudaDevice) {
  LocalClusterOptions o = Cluster("cuda");
  o.extra_worker_flags = {"--device=cuda:0"};
  const absl::StatusOr<std::unique_ptr<LocalCluster>> c = LocalCluster::Start(o);
  for (const char* worker : {"prefill-0", "decode-0"}) {
    const std::string log = testing::FileContents(absl::StrCat(o.log_dir, "/", worker, ".log"));
    EXPECT_TRUE(absl::StrContains(log, "loaded the CUDA module")) << worker << ":\n" << log;
    EXPECT_FALSE(absl::StrContains(log, "cannot load the CUDA module")) << worker << ":\n" << log;
  }
  if (c.ok()) {
    for (const ClusterProcess& p : (*c)->processes()) {
      if (p.name == "router") continue;
      EXPECT_FALSE(MappedLibraries(p.pid, {kCudaModuleFileName}).empty()) << p.name;
    }
  }
}

TEST_F(CudaModuleTest, PdserveRunLoadsTheModuleForACudaDevice) {
  const CommandResult r = RunCommand(absl::StrCat(BinDir(), "/pdserve run --model=", *model_path_,
                                                  " --device=cuda:0 --prompt=hi --max_tokens=1"));
  EXPECT_TRUE(absl::StrContains(r.output, "loaded the CUDA module")) << r.output;
  EXPECT_FALSE(absl::StrContains(r.output, "cannot load")) << r.output;
}

// `pdserve run --device=cuda:0` with $PDSERVE_CUDA_MODULE naming `module`.
CommandResult RunWithModule(const std::string& module, const std::string& model) {
  return RunCommand(absl::StrCat("PDSERVE_CUDA_MODULE=", module, " ", BinDir(),
                                 "/pdserve run --model=", model,
                                 " --device=cuda:0 --prompt=hi --max_tokens=1"));
}

TEST_F(CudaModuleTest, AMissingModuleIsAClearError) {
  const std::string missing = TestTempDir("cuda-module-test") + "/no-such-module.so";
  const CommandResult r = RunWithModule(missing, *model_path_);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(
      absl::StrContains(r.output, "FAILED_PRECONDITION: cannot load the CUDA module " + missing))
      << r.output;
}

TEST_F(CudaModuleTest, AStaleModuleIsRefusedBeforeAnyCall) {
  const std::string stale = BinDir() + "/libfake_cuda_module_stale.so";
  const CommandResult r = RunWithModule(stale, *model_path_);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(absl::StrContains(r.output,
                                absl::StrCat(stale, " has ABI version ", kCudaModuleAbiVersion + 1,
                                             ", this binary needs ", kCudaModuleAbiVersion)))
      << r.output;
}

TEST_F(CudaModuleTest, ASharedObjectWithoutTheEntryIsRefused) {
  const std::string other = BinDir() + "/libfake_cuda_module_no_entry.so";
  const CommandResult r = RunWithModule(other, *model_path_);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(absl::StrContains(r.output, other + " is not a pdserve CUDA module")) << r.output;
}

// This test binary does not export pdserve's symbols, so loading the real
// module here must fail on the first unresolved one (RTLD_NOW), naming it,
// rather than succeed and crash at a later call.
TEST_F(CudaModuleTest, AnExecutableThatDoesNotExportPdserveCannotLoadIt) {
  setenv("PDSERVE_CUDA_MODULE", (BinDir() + "/" + kCudaModuleFileName).c_str(), 1);
  const absl::StatusOr<const CudaModuleApi*> api = LoadCudaModule();
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(api.status().message(), "undefined symbol: _ZN7pdserve") ||
              absl::StrContains(api.status().message(), "undefined symbol: _ZNK7pdserve") ||
              absl::StrContains(api.status().message(), "undefined symbol: _ZTIN7pdserve"))
      << api.status();
}

}  // namespace
}  // namespace pdserve
