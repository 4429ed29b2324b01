#include "tools/bench/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace pdserve {

int OutputTokens(const RequestRecord& r) {
  int n = 0;
  for (const ChunkArrival& c : r.chunks) n += c.tokens;
  return n;
}

std::optional<double> Ttft(const RequestRecord& r) {
  if (r.chunks.empty()) return std::nullopt;
  return r.chunks.front().ms;
}

std::optional<double> Tpot(const RequestRecord& r) {
  const int n = OutputTokens(r);
  const std::optional<double> ttft = Ttft(r);
  if (n < 2 || !ttft.has_value()) return std::nullopt;
  return (r.e2e_ms - *ttft) / (n - 1);
}

void AppendItls(const RequestRecord& r, std::vector<double>* out) {
  if (r.chunks.empty()) return;
  double prev = r.chunks.front().ms;
  for (size_t i = 1; i < r.chunks.size(); ++i) {
    const ChunkArrival& c = r.chunks[i];
    // A text-only chunk (no ids) carries no token; its time is not a token
    // arrival, so it neither adds a gap nor moves the reference point.
    if (c.tokens == 0) continue;
    const double gap = (c.ms - prev) / c.tokens;
    out->insert(out->end(), c.tokens, gap);
    prev = c.ms;
  }
}

double Percentile(const std::vector<double>& sorted, double q) {
  const double rank = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

Distribution Summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = values.size();
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(d.count);
  d.p50 = Percentile(values, 0.50);
  d.p90 = Percentile(values, 0.90);
  d.p99 = Percentile(values, 0.99);
  d.min = values.front();
  d.max = values.back();
  return d;
}

bool MeetsSlo(const RequestRecord& r, const Slo& slo) {
  if (r.code != absl::StatusCode::kOk) return false;
  if (slo.ttft_ms.has_value()) {
    const std::optional<double> ttft = Ttft(r);
    if (!ttft.has_value() || *ttft > *slo.ttft_ms) return false;
  }
  if (slo.tpot_ms.has_value()) {
    const std::optional<double> tpot = Tpot(r);
    if (tpot.has_value() && *tpot > *slo.tpot_ms) return false;
  }
  return true;
}

namespace {

void AddPhases(const PhaseTimings& t, PhaseSummary* s) {
  PhaseTimings& m = s->mean;
  m.router_queue_ms += t.router_queue_ms;
  m.decode_admission_ms += t.decode_admission_ms;
  m.prefill_queue_ms += t.prefill_queue_ms;
  m.prefill_compute_ms += t.prefill_compute_ms;
  m.kv_transfer_ms += t.kv_transfer_ms;
  m.kv_transfer_bytes += t.kv_transfer_bytes;
  m.first_decode_step_ms += t.first_decode_step_ms;
  m.server_ttft_ms += t.server_ttft_ms;
  m.server_e2e_ms += t.server_e2e_ms;
  s->remote_prefill += t.remote_prefill ? 1 : 0;
  ++s->count;
}

void DividePhases(PhaseSummary* s) {
  if (s->count == 0) return;
  const double n = static_cast<double>(s->count);
  PhaseTimings& m = s->mean;
  for (double* v : {&m.router_queue_ms, &m.decode_admission_ms, &m.prefill_queue_ms,
                    &m.prefill_compute_ms, &m.kv_transfer_ms, &m.kv_transfer_bytes,
                    &m.first_decode_step_ms, &m.server_ttft_ms, &m.server_e2e_ms}) {
    *v /= n;
  }
}

double PerSecond(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0; }

}  // namespace

BenchSummary SummarizeRun(const std::vector<RequestRecord>& records, double duration_s,
                          const Slo& slo) {
  BenchSummary s;
  s.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  for (const RequestRecord& r : records) {
    if (r.code != absl::StatusCode::kOk) {
      ++s.failed;
      const std::string code = absl::StatusCodeToString(r.code);
      ++s.errors[code];
      s.error_example.emplace(code, r.error);
      continue;
    }
    ++s.completed;
    s.input_tokens += r.input_tokens;
    s.output_tokens += OutputTokens(r);
    if (std::optional<double> v = Ttft(r)) ttft.push_back(*v);
    if (std::optional<double> v = Tpot(r)) tpot.push_back(*v);
    AppendItls(r, &itl);
    e2e.push_back(r.e2e_ms);
    if (MeetsSlo(r, slo)) ++s.good_requests;
    if (r.timings.has_value()) AddPhases(*r.timings, &s.phases);
  }
  DividePhases(&s.phases);
  s.request_throughput = PerSecond(static_cast<double>(s.completed), duration_s);
  s.output_throughput = PerSecond(static_cast<double>(s.output_tokens), duration_s);
  s.total_token_throughput =
      PerSecond(static_cast<double>(s.input_tokens + s.output_tokens), duration_s);
  s.goodput = PerSecond(static_cast<double>(s.good_requests), duration_s);
  s.ttft_ms = Summarize(std::move(ttft));
  s.tpot_ms = Summarize(std::move(tpot));
  s.itl_ms = Summarize(std::move(itl));
  s.e2e_ms = Summarize(std::move(e2e));
  return s;
}

}  // namespace pdserve
