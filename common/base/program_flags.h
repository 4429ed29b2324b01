// InitProgramFlags: what every pdserve binary's main() sets up before it
// parses its flags, so that all four behave the same:
//   - the usage line --help prints;
//   - --help (and --helpshort, --helppackage) list the flags defined in the
//     project's own sources, with their defaults. Abseil's default matches
//     only a file named after the binary, and pdserve's flags live in
//     library files, so it matched none ("No flags matched");
//   - --version prints VersionString(): the version and the build's commit.
//
// Thread-safety: InitProgramFlags once, first thing in main(), before
// absl::ParseCommandLine and before any other thread starts. The filename
// helpers are pure functions.
#ifndef PDSERVE_COMMON_BASE_PROGRAM_FLAGS_H_
#define PDSERVE_COMMON_BASE_PROGRAM_FLAGS_H_

#include <string>

#include "absl/strings/string_view.h"

namespace pdserve {

void InitProgramFlags(absl::string_view usage);

// A flag's defining file as --help shows it. The registry records __FILE__
// as the compiler was given it (absolute, or relative to the build
// directory): a project file becomes relative to the source tree
// ("common/rpc/server_tls_flags.cc"); any other keeps abseil's default
// (leading slashes dropped). Idempotent.
std::string ProjectRelativeFilename(absl::string_view filename);
// True for a file under one of the project's source folders (common/,
// router/, prefill_worker/, decode_worker/, tools/), spelled either way.
bool IsProjectSourceFile(absl::string_view filename);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_BASE_PROGRAM_FLAGS_H_
