// `pdserve bench-engine`: engine throughput in this process — prompt
// processing (pp), single-stream decode (tg) and batched decode — at each
// thread count in --bench_threads. Prints a table and optionally JSON.
#ifndef PDSERVE_TOOLS_CLI_BENCH_ENGINE_H_
#define PDSERVE_TOOLS_CLI_BENCH_ENGINE_H_

#include "absl/status/status.h"

namespace pdserve {

absl::Status BenchEngineCommand();

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_CLI_BENCH_ENGINE_H_
