// The build's identity, for --version: the project's version (CMake's
// project(VERSION)) and the commit the sources were built from. Both come
// from build_commit.h, which common/base/build_commit.cmake writes into the
// build tree at every build (rewriting it only when the commit changes), so
// only build_info.cc depends on the commit.
//
// Thread-safety: pure functions.
#ifndef PDSERVE_COMMON_BASE_BUILD_INFO_H_
#define PDSERVE_COMMON_BASE_BUILD_INFO_H_

#include <string>

#include "absl/strings/string_view.h"

namespace pdserve {

// "0.1.0".
absl::string_view ProjectVersion();
// The short hash of the source tree's HEAD at build time; "unknown" when
// the sources were not a git checkout (or git was missing).
absl::string_view BuildCommit();
// "pdserve 0.1.0 (commit abc1234)".
std::string VersionString();

}  // namespace pdserve

#endif  // PDSERVE_COMMON_BASE_BUILD_INFO_H_
