// LocalCluster's start-up on shell-script stand-ins for the three binaries:
// each records its arguments and, as the real ones do once serving, writes
// the ports it "bound" to its --port_file. What the stand-in does is chosen
// by its --model: "serve" reports ports, "exit" exits at once, "silent"
// never reports.
#include "tools/cli/local_cluster.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace pdserve {
namespace {

constexpr char kStandIn[] = R"(#!/bin/sh
for a in "$@"; do
  case "$a" in
    --port_file=*) file="${a#--port_file=}" ;;
    --listen=*) port="${a##*:}" ;;
    --metrics_port=*) metrics="${a#--metrics_port=}" ;;
    --model=*) model="${a#--model=}" ;;
  esac
done
echo "$@" > "$file.args"
[ "$model" = exit ] && exit 3
[ "$model" = silent ] && exec sleep 300
# Port 0: the kernel would pick; any number unlikely to repeat will do.
[ "$port" = 0 ] && port=$(( $$ % 20000 + 30000 ))
[ "$metrics" = -1 ] && metrics=$(( port + 1 ))
# Written aside and renamed, as the binaries do (common/rpc/port_file.h):
# a reader never sees a half-written file.
printf 'grpc=%s\nmetrics=%s\nkv=0\n' "$port" "${metrics:-0}" > "$file.tmp"
mv "$file.tmp" "$file"
exec sleep 300
)";

class LocalClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = root_dir_.path();
    std::filesystem::create_directories(root_ + "/bin");
    for (const char* bin : {"pdserve-prefill", "pdserve-decode", "pdserve-router"}) {
      const std::string path = absl::StrCat(root_, "/bin/", bin);
      std::ofstream(path) << kStandIn;
      chmod(path.c_str(), 0755);
    }
    options_.bin_dir = root_ + "/bin";
    options_.log_dir = root_ + "/logs";
    options_.model = "serve";
  }

  // The arguments `name` was last started with, as it recorded them.
  std::string RecordedArgs(const std::string& name) const {
    std::ifstream in(absl::StrCat(options_.log_dir, "/", name, ".port.args"));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  const ClusterProcess& Process(const LocalCluster& c, const std::string& name) {
    for (const ClusterProcess& p : c.processes()) {
      if (p.name == name) return p;
    }
    ADD_FAILURE() << "no process " << name;
    return c.processes().front();
  }

  // Each test's stand-ins and logs in a directory of its own, removed after
  // the test (the clusters, locals of the tests, are stopped by then).
  const testing::ScopedTempDir root_dir_{"local-cluster-test"};
  std::string root_;
  LocalClusterOptions options_;
};

TEST_F(LocalClusterTest, TheRouterIsGivenThePortsTheWorkersReported) {
  options_.prefill = 1;
  options_.decode = 2;
  auto c = LocalCluster::Start(options_);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<std::string> decode = (*c)->addresses("decode");
  const std::vector<std::string> prefill = (*c)->addresses("prefill");
  ASSERT_EQ(decode.size(), 2u);
  ASSERT_EQ(prefill.size(), 1u);
  for (const ClusterProcess& p : (*c)->processes()) {
    EXPECT_GT(p.port, 0) << p.name;
  }
  const std::string router = RecordedArgs("router");
  EXPECT_TRUE(absl::StrContains(router, absl::StrCat("--decode=", decode[0], ",", decode[1])))
      << router;
  EXPECT_TRUE(absl::StrContains(router, "--prefill=" + prefill[0])) << router;
  EXPECT_EQ((*c)->router_address(), absl::StrCat("127.0.0.1:", Process(**c, "router").port));
}

TEST_F(LocalClusterTest, AnyFreeMetricsPortIsReportedAndARestartKeepsItsPorts) {
  options_.extra_decode_flags = {"--metrics_port=-1"};
  auto c = LocalCluster::Start(options_);
  ASSERT_TRUE(c.ok()) << c.status();
  const ClusterProcess& decode = Process(**c, "decode-0");
  const int grpc = decode.port;
  const int metrics = (*c)->metrics_port("decode-0");
  EXPECT_EQ(metrics, grpc + 1);
  EXPECT_EQ((*c)->metrics_port("prefill-0"), 0) << "no metrics server asked for";
  (*c)->Kill("decode-0");
  ASSERT_TRUE((*c)->Restart("decode-0").ok());
  // The restarted stand-in records its arguments first thing.
  const std::string want_listen = absl::StrCat("--listen=127.0.0.1:", grpc);
  const std::string want_metrics = absl::StrCat("--metrics_port=", metrics);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::string args;
  while (absl::Now() < deadline) {
    args = RecordedArgs("decode-0");
    if (absl::StrContains(args, want_listen)) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(absl::StrContains(args, want_listen)) << args;
  EXPECT_TRUE(absl::StrContains(args, want_metrics)) << args;
  EXPECT_FALSE(absl::StrContains(args, "--listen=127.0.0.1:0 ")) << args;
}

TEST_F(LocalClusterTest, AWorkerThatExitsFailsTheStartWithItsName) {
  options_.prefill_model = "exit";
  auto c = LocalCluster::Start(options_);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(c.status())) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), "prefill-0 exited (status 3)")) << c.status();
}

TEST_F(LocalClusterTest, AWorkerThatNeverReportsTimesOut) {
  options_.model = "silent";
  options_.start_timeout = absl::Milliseconds(300);
  auto c = LocalCluster::Start(options_);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(c.status())) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), "did not report its ports")) << c.status();
}

}  // namespace
}  // namespace pdserve
