// Port files: what a process started on port 0 writes once it serves, read
// back by LocalCluster (tools/cli/local_cluster.h).
#include "common/rpc/port_file.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace pdserve {
namespace {

// In a directory of this binary's own: the temp directory is shared with
// other runs on the machine.
std::string TempPath(const std::string& name) {
  return testing::TestTempDir("port-file-test") + "/" + name;
}

TEST(PortFileTest, RoundTripsEveryPort) {
  const std::string path = TempPath("round_trip");
  ASSERT_TRUE(WritePortFile(path, {.grpc = 40001, .metrics = 40002, .kv = 40003}).ok());
  absl::StatusOr<BoundPorts> read = ReadPortFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->grpc, 40001);
  EXPECT_EQ(read->metrics, 40002);
  EXPECT_EQ(read->kv, 40003);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp")) << "the temporary name is renamed away";
}

TEST(PortFileTest, RewritingReplacesTheOldPorts) {
  const std::string path = TempPath("rewrite");
  ASSERT_TRUE(WritePortFile(path, {.grpc = 40001, .metrics = 40002}).ok());
  ASSERT_TRUE(WritePortFile(path, {.grpc = 40011}).ok());
  absl::StatusOr<BoundPorts> read = ReadPortFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->grpc, 40011);
  EXPECT_EQ(read->metrics, 0);
}

TEST(PortFileTest, AnEmptyPathWritesNothing) { EXPECT_TRUE(WritePortFile("", {.grpc = 1}).ok()); }

TEST(PortFileTest, AMissingFileIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(ReadPortFile(TempPath("never_written")).status()));
}

TEST(PortFileTest, AnUnwritableDirectoryFails) {
  EXPECT_FALSE(WritePortFile("/nonexistent-dir/ports", {.grpc = 1}).ok());
}

TEST(PortFileTest, GarbageIsRefused) {
  for (const char* text :
       {"", "metrics=1\n", "grpc=0\n", "grpc=70000\n", "grpc=12ab\n", "grpc\n", "grpc=-5\n"}) {
    const std::string path = TempPath("garbage");
    std::ofstream(path, std::ios::trunc) << text;
    absl::StatusOr<BoundPorts> read = ReadPortFile(path);
    EXPECT_TRUE(absl::IsInvalidArgument(read.status())) << "'" << text << "': " << read.status();
  }
}

}  // namespace
}  // namespace pdserve
