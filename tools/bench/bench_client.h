// RunLoad: drives a server with the requests of a Workload, in one process,
// and times every streamed chunk. The calling thread only paces arrivals;
// a BenchTarget (bench_target.h) sends each request and times its stream.
//
// Pacing: with `request_rate` > 0 requests arrive as an ArrivalProcess
// (open loop); `max_concurrency` > 0 caps the requests in flight (with no
// rate this is a closed loop: a request starts as soon as one ends). A
// request held back by the cap is timed from when it is actually sent.
//
// Thread-safety: RunLoad may be called from any thread; one call at a time
// per stub is not required.
#ifndef PDSERVE_TOOLS_BENCH_BENCH_CLIENT_H_
#define PDSERVE_TOOLS_BENCH_BENCH_CLIENT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "pdserve/v1/generation.grpc.pb.h"
#include "tools/bench/bench_stats.h"
#include "tools/bench/bench_target.h"
#include "tools/bench/bench_workload.h"
#include "tools/bench/prompt_text.h"

namespace pdserve {

struct LoadOptions {
  double request_rate = 0;  // requests/s; 0 = no pacing
  double burstiness = 1;    // Gamma shape of the gaps; 1 = Poisson
  int max_concurrency = 0;  // 0 = no cap
  // The run stops sending at whichever limit comes first; 0 = no limit.
  int64_t num_requests = 0;
  absl::Duration duration = absl::ZeroDuration();
  absl::Duration request_timeout = absl::Minutes(5);
  int64_t first_index = 0;  // workload index of the first request
  uint64_t seed = 0;        // arrival times
  v1::SamplingParams sampling;
  bool ignore_eos = false;
  // Text-prompt mode, for servers that take no token ids: each prompt is
  // sent as the text of its ids (see prompt_text.h). Null = token ids.
  const PromptText* prompt_text = nullptr;
};

struct LoadResult {
  std::vector<RequestRecord> records;  // in workload index order
  double duration_s = 0;               // first send until the last stream ended
};

// INVALID_ARGUMENT when neither a rate nor a cap paces the run, or nothing
// bounds it. Request failures are recorded, not returned.
absl::StatusOr<LoadResult> RunLoad(BenchTarget* target, const Workload& workload,
                                   const LoadOptions& options);
// Against a Generation server (a GenerationTarget over `stub`).
absl::StatusOr<LoadResult> RunLoad(v1::Generation::StubInterface* stub, const Workload& workload,
                                   const LoadOptions& options);

// What RunLoad hands the target for `shape`.
BenchRequestSpec SpecFor(const RequestShape& shape, const LoadOptions& options);

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_BENCH_CLIENT_H_
