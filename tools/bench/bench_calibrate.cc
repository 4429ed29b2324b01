#include "tools/bench/bench_calibrate.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"
#include "tools/bench/bench_client.h"
#include "tools/bench/bench_echo_server.h"

namespace pdserve {
namespace {

using Clock = std::chrono::steady_clock;

// Average cost of the timestamp the client takes per chunk.
double ClockReadNs() {
  constexpr int kReads = 1 << 20;
  // XOR, not a sum: a million nanosecond timestamps overflow a signed sum (UBSan caught it once
  // the machine had been up long enough).
  uint64_t sink = 0;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < kReads; ++i) {
    sink ^= static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  }
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
  // Keeps the loop from being optimised away.
  if (sink == 42) std::abort();
  return ns / kReads;
}

}  // namespace

absl::StatusOr<CalibrationResult> Calibrate(const CalibrationOptions& options) {
  CalibrationResult out;
  out.clock_read_ns = ClockReadNs();
  ASSIGN_OR_RETURN(std::unique_ptr<EchoGenerationServer> server, EchoGenerationServer::Start());
  std::unique_ptr<v1::Generation::Stub> stub = v1::Generation::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  WorkloadOptions w;
  w.input = {16, 16};
  w.output = {options.tokens_per_request, options.tokens_per_request};
  w.vocab_size = EchoGenerationServer::kVocabSize;
  ASSIGN_OR_RETURN(Workload workload, Workload::Create(w));
  LoadOptions load;
  load.max_concurrency = options.concurrency;
  // The first calls open the connection; they are not part of the floor.
  load.num_requests = options.concurrency;
  load.first_index = options.requests;
  RETURN_IF_ERROR(RunLoad(stub.get(), workload, load).status());
  load.num_requests = options.requests;
  load.first_index = 0;
  ASSIGN_OR_RETURN(LoadResult result, RunLoad(stub.get(), workload, load));
  out.summary = SummarizeRun(result.records, result.duration_s, Slo{});
  const Distribution& ttft = out.summary.ttft_ms;
  const Distribution& itl = out.summary.itl_ms;
  // In microseconds: the floor is far below the table's millisecond grain.
  out.settings = {
      {"calibration", "client vs in-process echo server"},
      {"requests x tokens", absl::StrCat(options.requests, " x ", options.tokens_per_request)},
      {"concurrency", absl::StrCat(options.concurrency)},
      {"clock read (ns)", absl::StrFormat("%.1f", out.clock_read_ns)},
      {"TTFT floor p50 / p99 (us)", absl::StrFormat("%.1f / %.1f", ttft.p50 * 1e3, ttft.p99 * 1e3)},
      {"ITL floor mean / p50 / p99 (us)",
       absl::StrFormat("%.2f / %.2f / %.2f", itl.mean * 1e3, itl.p50 * 1e3, itl.p99 * 1e3)},
  };
  return out;
}

}  // namespace pdserve
