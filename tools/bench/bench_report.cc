#include "tools/bench/bench_report.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace pdserve {
namespace {

constexpr int kRule = 66;

std::string Rule(absl::string_view title) {
  const int pad = kRule - static_cast<int>(title.size()) - 2;
  if (title.empty()) return std::string(kRule, '-') + "\n";
  return absl::StrCat(std::string(pad / 2, '-'), " ", title, " ", std::string(pad - pad / 2, '-'),
                      "\n");
}

std::string Row(absl::string_view name, absl::string_view value) {
  return absl::StrFormat("%-34s %s\n", name, value);
}

std::string Num(double v) { return absl::StrFormat("%.2f", v); }

std::string SloText(const Slo& slo) {
  std::vector<std::string> parts;
  if (slo.ttft_ms) parts.push_back(absl::StrFormat("TTFT <= %g ms", *slo.ttft_ms));
  if (slo.tpot_ms) parts.push_back(absl::StrFormat("TPOT <= %g ms", *slo.tpot_ms));
  return absl::StrJoin(parts, ", ");
}

std::string LatencyTable(const BenchSummary& s) {
  std::string out = absl::StrFormat("%-10s %9s %9s %9s %9s %9s %9s\n", "ms", "mean", "p50", "p90",
                                    "p99", "max", "count");
  const std::pair<const char*, const Distribution*> rows[] = {
      {"TTFT", &s.ttft_ms}, {"TPOT", &s.tpot_ms}, {"ITL", &s.itl_ms}, {"E2E", &s.e2e_ms}};
  for (const auto& [name, d] : rows) {
    absl::StrAppendFormat(&out, "%-10s %9.2f %9.2f %9.2f %9.2f %9.2f %9zu\n", name, d->mean, d->p50,
                          d->p90, d->p99, d->max, d->count);
  }
  return out;
}

std::string PhaseTable(const BenchSummary& s) {
  const PhaseSummary& p = s.phases;
  if (p.count == 0) return "";
  const PhaseTimings& m = p.mean;
  std::string out = Rule("server-reported TTFT breakdown (mean)");
  out += Row("router queue (ms)", Num(m.router_queue_ms));
  out += Row("decode admission (ms)", Num(m.decode_admission_ms));
  out += Row("prefill queue (ms)", Num(m.prefill_queue_ms));
  out += Row("prefill compute (ms)", Num(m.prefill_compute_ms));
  out += Row("KV transfer (ms)", Num(m.kv_transfer_ms));
  out += Row("KV transfer (KiB)", Num(m.kv_transfer_bytes / 1024.0));
  out += Row("first decode step (ms)", Num(m.first_decode_step_ms));
  out += Row("router TTFT (ms)", Num(m.server_ttft_ms));
  out += Row("router E2E (ms)", Num(m.server_e2e_ms));
  // What the router cannot see: network, gRPC and this client.
  out += Row("client TTFT - router TTFT (ms)", Num(s.ttft_ms.mean - m.server_ttft_ms));
  out += Row("remote prefill (requests)", absl::StrCat(p.remote_prefill, " of ", p.count));
  return out;
}

std::string ErrorTable(const BenchSummary& s) {
  if (s.errors.empty()) return "";
  std::string out = Rule("errors");
  for (const auto& [code, n] : s.errors) {
    absl::StrAppendFormat(&out, "%-20s %6zu  e.g. %s\n", code, n, s.error_example.at(code));
  }
  return out;
}

}  // namespace

std::string FormatReport(const BenchSettings& settings, const BenchSummary& s, const Slo& slo) {
  std::string out = std::string(kRule, '=') + "\n";
  for (const auto& [name, value] : settings) out += Row(name, value);
  out += Rule("results");
  out += Row("successful requests", absl::StrCat(s.completed));
  out += Row("failed requests", absl::StrCat(s.failed));
  out += Row("benchmark duration (s)", Num(s.duration_s));
  out += Row("total input tokens", absl::StrCat(s.input_tokens));
  out += Row("total output tokens", absl::StrCat(s.output_tokens));
  out += Row("request throughput (req/s)", Num(s.request_throughput));
  out += Row("output token throughput (tok/s)", Num(s.output_throughput));
  out += Row("total token throughput (tok/s)", Num(s.total_token_throughput));
  if (slo.ttft_ms || slo.tpot_ms) {
    out += Row("SLO", SloText(slo));
    out += Row("goodput (req/s)", Num(s.goodput));
    out += Row("requests meeting the SLO",
               absl::StrCat(s.good_requests, " of ", s.completed + s.failed));
  }
  out += Rule("latency");
  out += LatencyTable(s);
  out += PhaseTable(s);
  out += ErrorTable(s);
  out += std::string(kRule, '=') + "\n";
  return out;
}

nlohmann::json DistributionJson(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"p50", d.p50}, {"p90", d.p90},
          {"p99", d.p99},     {"min", d.min},   {"max", d.max}};
}

nlohmann::json SummaryJson(const BenchSummary& s, const Slo& slo) {
  nlohmann::json j = {
      {"completed", s.completed},
      {"failed", s.failed},
      {"errors", s.errors},
      {"error_examples", s.error_example},
      {"duration_s", s.duration_s},
      {"input_tokens", s.input_tokens},
      {"output_tokens", s.output_tokens},
      {"request_throughput", s.request_throughput},
      {"output_token_throughput", s.output_throughput},
      {"total_token_throughput", s.total_token_throughput},
      {"ttft_ms", DistributionJson(s.ttft_ms)},
      {"tpot_ms", DistributionJson(s.tpot_ms)},
      {"itl_ms", DistributionJson(s.itl_ms)},
      {"e2e_ms", DistributionJson(s.e2e_ms)},
  };
  j["slo"] = {{"ttft_ms", slo.ttft_ms ? nlohmann::json(*slo.ttft_ms) : nlohmann::json()},
              {"tpot_ms", slo.tpot_ms ? nlohmann::json(*slo.tpot_ms) : nlohmann::json()}};
  const bool has_slo = slo.ttft_ms || slo.tpot_ms;
  j["good_requests"] = has_slo ? nlohmann::json(s.good_requests) : nlohmann::json();
  j["goodput"] = has_slo ? nlohmann::json(s.goodput) : nlohmann::json();
  const PhaseTimings& m = s.phases.mean;
  j["phases_mean"] = {{"count", s.phases.count},
                      {"remote_prefill", s.phases.remote_prefill},
                      {"router_queue_ms", m.router_queue_ms},
                      {"decode_admission_ms", m.decode_admission_ms},
                      {"prefill_queue_ms", m.prefill_queue_ms},
                      {"prefill_compute_ms", m.prefill_compute_ms},
                      {"kv_transfer_ms", m.kv_transfer_ms},
                      {"kv_transfer_bytes", m.kv_transfer_bytes},
                      {"first_decode_step_ms", m.first_decode_step_ms},
                      {"router_ttft_ms", m.server_ttft_ms},
                      {"router_e2e_ms", m.server_e2e_ms}};
  return j;
}

nlohmann::json RecordsJson(const std::vector<RequestRecord>& records) {
  nlohmann::json out = nlohmann::json::array();
  for (const RequestRecord& r : records) {
    const std::optional<double> ttft = Ttft(r), tpot = Tpot(r);
    out.push_back({{"index", r.index},
                   {"status", absl::StatusCodeToString(r.code)},
                   {"input_tokens", r.input_tokens},
                   {"max_tokens", r.requested_output_tokens},
                   {"output_tokens", OutputTokens(r)},
                   {"send_s", r.send_s},
                   {"ttft_ms", ttft ? nlohmann::json(*ttft) : nlohmann::json()},
                   {"tpot_ms", tpot ? nlohmann::json(*tpot) : nlohmann::json()},
                   {"e2e_ms", r.e2e_ms}});
  }
  return out;
}

nlohmann::json SettingsJson(const BenchSettings& settings) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : settings) j[name] = value;
  return j;
}

absl::Status WriteJsonFile(const std::string& path, const nlohmann::json& doc) {
  std::ofstream f(path);
  f << doc.dump(2) << "\n";
  f.close();
  if (!f) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace pdserve
