// StructuredOutputMetrics: the router's view of structured output and tool
// calling — admitted requests by constraint kind and by tool choice, the
// time the admission compile took (a cache hit included), and refusals by
// reason (a constraint that does not compile; tools that are malformed,
// over the limits, unsupported by the template or in conflict).
//
// Thread-safe; every series exists (at 0) from the first scrape.
#ifndef PDSERVE_ROUTER_CALL_STRUCTURED_OUTPUT_METRICS_H_
#define PDSERVE_ROUTER_CALL_STRUCTURED_OUTPUT_METRICS_H_

#include <array>

#include "common/metrics/metrics_registry.h"
#include "common/request/grammar_constraint.h"
#include "pdserve/v1/generation.pb.h"

namespace pdserve::router {

class StructuredOutputMetrics {
 public:
  enum class Refusal { kConstraint, kTools };

  // `registry` must outlive this object.
  explicit StructuredOutputMetrics(MetricsRegistry* registry);

  void CountConstrained(GrammarKind kind);
  void CountToolChoice(v1::ToolChoice::Mode mode);
  void ObserveCompile(double seconds);
  void CountRefusal(Refusal reason);

 private:
  static constexpr int kNumKinds = 5;
  static constexpr int kNumModes = 4;
  std::array<Counter*, kNumKinds> constrained_;
  std::array<Counter*, kNumModes> tool_choices_;
  std::array<Counter*, 2> refusals_;
  Histogram* compile_;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_STRUCTURED_OUTPUT_METRICS_H_
