#include "router/call/structured_output_metrics.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"

namespace pdserve::router {
namespace {

// A cache hit is microseconds; a large schema on a 150k vocabulary, up to
// a second or so.
std::vector<double> CompileSecondsBuckets() {
  return {1e-5, 1e-4, 1e-3, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
}

}  // namespace

StructuredOutputMetrics::StructuredOutputMetrics(MetricsRegistry* registry) {
  for (int k = 0; k < kNumKinds; ++k) {
    constrained_[k] = registry->GetCounter(
        "pdserve_router_constrained_requests_total",
        "Admitted requests with a structured-output constraint, by kind (structural_tag: a "
        "forced tool call).",
        {{"kind", GrammarKindName(static_cast<GrammarKind>(k))}});
  }
  for (int m = 0; m < kNumModes; ++m) {
    tool_choices_[m] = registry->GetCounter(
        "pdserve_router_tool_requests_total", "Admitted chat requests with tools, by tool_choice.",
        {{"choice", absl::AsciiStrToLower(v1::ToolChoice::Mode_Name(m))}});
  }
  refusals_[0] =
      registry->GetCounter("pdserve_router_structured_refusals_total",
                           "Requests refused at admission for their constraint or their tools.",
                           {{"reason", "constraint"}});
  refusals_[1] = registry->GetCounter(
      "pdserve_router_structured_refusals_total",
      "Requests refused at admission for their constraint or their tools.", {{"reason", "tools"}});
  compile_ = registry->GetHistogram(
      "pdserve_router_grammar_compile_seconds",
      "Compiling a request's constraint at admission (a cache hit included).",
      CompileSecondsBuckets());
}

void StructuredOutputMetrics::CountConstrained(GrammarKind kind) {
  const int k = static_cast<int>(kind);
  if (k >= 0 && k < kNumKinds) constrained_[k]->Increment();
}

void StructuredOutputMetrics::CountToolChoice(v1::ToolChoice::Mode mode) {
  if (mode >= 0 && mode < kNumModes) tool_choices_[mode]->Increment();
}

void StructuredOutputMetrics::ObserveCompile(double seconds) { compile_->Observe(seconds); }

void StructuredOutputMetrics::CountRefusal(Refusal reason) {
  refusals_[reason == Refusal::kTools ? 1 : 0]->Increment();
}

}  // namespace pdserve::router
