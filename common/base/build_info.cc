#include "common/base/build_info.h"

#include "absl/strings/str_cat.h"
// Generated in the build tree (common/base/build_commit.cmake): defines
// PDSERVE_VERSION and PDSERVE_COMMIT.
#include "build_commit.h"

namespace pdserve {

absl::string_view ProjectVersion() { return PDSERVE_VERSION; }

absl::string_view BuildCommit() { return PDSERVE_COMMIT; }

std::string VersionString() {
  return absl::StrCat("pdserve ", ProjectVersion(), " (commit ", BuildCommit(), ")");
}

}  // namespace pdserve
