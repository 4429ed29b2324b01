// --help's file filter and names: a project file counts however the build
// spelled its path, abseil's own files never do; --version's text.
#include "common/base/program_flags.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/build_info.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

TEST(ProgramFlagsTest, ProjectFilesAreRelativeToTheSourceTree) {
  // This test's own path tells where the source tree is in __FILE__ paths.
  std::string root = __FILE__;
  root.resize(root.size() - std::string("tests/unit/base/program_flags_test.cc").size());
  EXPECT_EQ(ProjectRelativeFilename(root + "router/router_flags.cc"), "router/router_flags.cc");
  EXPECT_EQ(ProjectRelativeFilename("../common/rpc/server_tls_flags.cc"),
            "common/rpc/server_tls_flags.cc");
  EXPECT_EQ(ProjectRelativeFilename("/elsewhere/src/tools/cli/cli_flags.cc"), "tools/cli/cli_flags.cc");
  // Idempotent: abseil normalizes a name the filter normalizes again.
  EXPECT_EQ(ProjectRelativeFilename("tools/cli/cli_flags.cc"), "tools/cli/cli_flags.cc");
}

TEST(ProgramFlagsTest, OtherFilesKeepAbseilsNames) {
  EXPECT_EQ(ProjectRelativeFilename("./absl/flags/parse.cc"), "./absl/flags/parse.cc");
  EXPECT_EQ(ProjectRelativeFilename("/usr/src/absl/flags/parse.cc"), "usr/src/absl/flags/parse.cc");
}

TEST(ProgramFlagsTest, HelpListsOnlyTheProjectsFlags) {
  for (const char* file :
       {"/src/pdserve/common/worker/engine_runtime_flags.cc", "router/router_flags.cc",
        "../prefill_worker/main.cc", "decode_worker/main.cc", "tools/cli/cli_flags.cc"}) {
    EXPECT_TRUE(IsProjectSourceFile(file)) << file;
  }
  for (const char* file : {"./absl/flags/parse.cc", "absl/flags/internal/usage.cc",
                           "tests/unit/base/program_flags_test.cc", "mytools/x.cc"}) {
    EXPECT_FALSE(IsProjectSourceFile(file)) << file;
  }
}

TEST(ProgramFlagsTest, VersionNamesTheVersionAndTheCommit) {
  const std::string v = VersionString();
  EXPECT_TRUE(absl::StartsWith(v, "pdserve ")) << v;
  EXPECT_TRUE(absl::StrContains(v, ProjectVersion())) << v;
  EXPECT_TRUE(absl::EndsWith(v, absl::StrCat("(commit ", BuildCommit(), ")"))) << v;
  EXPECT_FALSE(ProjectVersion().empty());
  EXPECT_FALSE(BuildCommit().empty());
}

}  // namespace
}  // namespace pdserve
