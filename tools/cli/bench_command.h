// `pdserve bench`: a serving benchmark against any Generation server (a
// router, or anything that speaks pdserve.v1.Generation). Usage and metric
// definitions: docs/PERFORMANCE.md, section "pdserve bench".
#ifndef PDSERVE_TOOLS_CLI_BENCH_COMMAND_H_
#define PDSERVE_TOOLS_CLI_BENCH_COMMAND_H_

#include "absl/status/status.h"

namespace pdserve {

absl::Status BenchCommand();

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_CLI_BENCH_COMMAND_H_
