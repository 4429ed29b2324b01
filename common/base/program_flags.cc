#include "common/base/program_flags.h"

#include <array>
#include <utility>

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/base/build_info.h"

namespace pdserve {
namespace {

// The folders that hold the project's flag definitions (tests/ defines
// none that a binary links).
constexpr std::array<absl::string_view, 5> kProjectFolders = {
    "common/", "decode_worker/", "prefill_worker/", "router/", "tools/"};

constexpr absl::string_view kThisFile = "common/base/program_flags.cc";

// What precedes "common/..." in the __FILE__ paths of this build, learned
// from this file's own: every project file is compiled the same way.
absl::string_view SourceTreePrefix() {
  absl::string_view self = __FILE__;
  if (!absl::ConsumeSuffix(&self, kThisFile)) return "";
  return self;
}

bool StartsWithProjectFolder(absl::string_view path) {
  for (absl::string_view folder : kProjectFolders) {
    if (absl::StartsWith(path, folder)) return true;
  }
  return false;
}

}  // namespace

std::string ProjectRelativeFilename(absl::string_view filename) {
  const absl::string_view prefix = SourceTreePrefix();
  if (!prefix.empty() && absl::ConsumePrefix(&filename, prefix)) return std::string(filename);
  // Spelled some other way (another build's relative paths, or already
  // relative): from the first path component that is a project folder.
  for (size_t at = 0; at < filename.size();) {
    if (StartsWithProjectFolder(filename.substr(at))) return std::string(filename.substr(at));
    at = filename.find('/', at);
    if (at == absl::string_view::npos) break;
    ++at;
  }
  // Not ours: abseil's own normalization.
  const size_t start = filename.find_first_not_of("/\\");
  return start == absl::string_view::npos ? "" : std::string(filename.substr(start));
}

bool IsProjectSourceFile(absl::string_view filename) {
  return StartsWithProjectFolder(ProjectRelativeFilename(filename));
}

void InitProgramFlags(absl::string_view usage) {
  absl::FlagsUsageConfig config;
  config.contains_help_flags = IsProjectSourceFile;
  config.contains_helpshort_flags = IsProjectSourceFile;
  config.contains_helppackage_flags = IsProjectSourceFile;
  config.normalize_filename = ProjectRelativeFilename;
  config.version_string = [] { return absl::StrCat(VersionString(), "\n"); };
  absl::SetFlagsUsageConfig(std::move(config));
  absl::SetProgramUsageMessage(usage);
}

}  // namespace pdserve
