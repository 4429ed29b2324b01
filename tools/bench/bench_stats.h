// Metric math for `pdserve bench`, free of I/O and gRPC so that every
// definition is unit-tested on its own. The definitions are the field's
// (vLLM and SGLang serving benchmarks), so numbers compare across systems:
//   TTFT  request sent -> first chunk that carries output
//   TPOT  (E2E - TTFT) / (output tokens - 1), per request
//   ITL   every gap between token arrivals, pooled over all requests
//   E2E   request sent -> end of the stream
//   goodput  successful requests meeting every SLO given, per second
// Percentiles interpolate linearly between closest ranks (numpy's default).
#ifndef PDSERVE_TOOLS_BENCH_BENCH_STATS_H_
#define PDSERVE_TOOLS_BENCH_BENCH_STATS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace pdserve {

// One chunk of the stream that carried text or token ids.
struct ChunkArrival {
  double ms = 0;   // since the request was sent
  int tokens = 0;  // token ids in the chunk
};

// What the router reported in Finished.timings (see common.proto).
struct PhaseTimings {
  double router_queue_ms = 0;
  double decode_admission_ms = 0;
  double prefill_queue_ms = 0;
  double prefill_compute_ms = 0;
  double kv_transfer_ms = 0;
  double kv_transfer_bytes = 0;
  double first_decode_step_ms = 0;
  double server_ttft_ms = 0;
  double server_e2e_ms = 0;
  bool remote_prefill = false;
};

struct RequestRecord {
  int64_t index = 0;
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string error;  // status message when code != kOk
  int input_tokens = 0;
  int requested_output_tokens = 0;
  double send_s = 0;  // since the benchmark started
  double e2e_ms = 0;
  std::vector<ChunkArrival> chunks;
  std::optional<PhaseTimings> timings;  // absent when the stream ended early
};

int OutputTokens(const RequestRecord& r);
std::optional<double> Ttft(const RequestRecord& r);
// Undefined for fewer than two output tokens.
std::optional<double> Tpot(const RequestRecord& r);
// Appends the request's inter-token gaps to `out`. A chunk of k tokens that
// arrives g ms after the previous one adds k gaps of g/k (as SGLang does):
// the gaps then sum to E2E's decode part, so mean ITL tracks TPOT, and a
// batched chunk is not misread as k-1 instant tokens. Tokens that share the
// first chunk add no gap: their wait is TTFT.
void AppendItls(const RequestRecord& r, std::vector<double>* out);

struct Distribution {
  size_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double min = 0;
  double max = 0;
};

// `q` in [0, 1]; `sorted` ascending and non-empty.
double Percentile(const std::vector<double>& sorted, double q);
// All zero (count 0) for no values.
Distribution Summarize(std::vector<double> values);

// Unset fields are no constraint.
struct Slo {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
};
// A failed request never meets an SLO; one without output misses a TTFT
// SLO; a one-token answer has no TPOT and so meets any TPOT SLO.
bool MeetsSlo(const RequestRecord& r, const Slo& slo);

// Means of the server-reported phases over the requests that reported them.
struct PhaseSummary {
  size_t count = 0;
  size_t remote_prefill = 0;
  PhaseTimings mean;
};

struct BenchSummary {
  size_t completed = 0;
  size_t failed = 0;
  std::map<std::string, size_t> errors;              // canonical code name -> count
  std::map<std::string, std::string> error_example;  // code name -> first message
  double duration_s = 0;
  int64_t input_tokens = 0;   // of completed requests
  int64_t output_tokens = 0;  // of completed requests
  double request_throughput = 0;
  double output_throughput = 0;
  double total_token_throughput = 0;
  size_t good_requests = 0;
  double goodput = 0;
  Distribution ttft_ms;
  Distribution tpot_ms;
  Distribution itl_ms;
  Distribution e2e_ms;
  PhaseSummary phases;
};

// `duration_s`: first request sent until the last one ended.
BenchSummary SummarizeRun(const std::vector<RequestRecord>& records, double duration_s,
                          const Slo& slo);

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_BENCH_STATS_H_
