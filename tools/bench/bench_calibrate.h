// Calibration of `pdserve bench` itself: how much of a measured TTFT or ITL
// is the client's own cost (clock reads, gRPC, reactor dispatch) rather than
// the server's. It runs the same client against EchoGenerationServer, which
// answers instantly, so the latencies it sees are the floor that any server
// measurement sits on. The echo server shares this process's cores, so the
// floor is an upper bound on the client's share.
#ifndef PDSERVE_TOOLS_BENCH_BENCH_CALIBRATE_H_
#define PDSERVE_TOOLS_BENCH_BENCH_CALIBRATE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/bench_stats.h"

namespace pdserve {

struct CalibrationOptions {
  int64_t requests = 100;
  int tokens_per_request = 128;
  int concurrency = 1;
};

struct CalibrationResult {
  double clock_read_ns = 0;  // one steady_clock::now()
  BenchSummary summary;      // the client against the echo server
  BenchSettings settings;    // what was run, for the report
};

absl::StatusOr<CalibrationResult> Calibrate(const CalibrationOptions& options);

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_BENCH_CALIBRATE_H_
