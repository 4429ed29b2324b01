// Presentation of `pdserve bench` results: the text table printed to stdout
// and the JSON document written by --json_out. No metric is computed here
// (that is bench_stats); this only lays numbers out.
#ifndef PDSERVE_TOOLS_BENCH_BENCH_REPORT_H_
#define PDSERVE_TOOLS_BENCH_BENCH_REPORT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "tools/bench/bench_stats.h"

namespace pdserve {

// (name, value) pairs echoed above the results: what was measured, how.
using BenchSettings = std::vector<std::pair<std::string, std::string>>;

std::string FormatReport(const BenchSettings& settings, const BenchSummary& summary,
                         const Slo& slo);

nlohmann::json DistributionJson(const Distribution& d);
nlohmann::json SummaryJson(const BenchSummary& summary, const Slo& slo);
// Per request: index, status, lengths, send time, TTFT, TPOT, E2E.
nlohmann::json RecordsJson(const std::vector<RequestRecord>& records);
nlohmann::json SettingsJson(const BenchSettings& settings);

absl::Status WriteJsonFile(const std::string& path, const nlohmann::json& doc);

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_BENCH_REPORT_H_
