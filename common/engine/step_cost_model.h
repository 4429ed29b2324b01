// StepCostModel: what a decode step costs on this machine, as a line in its
// number of rows, fitted to the steps the engine actually ran.
//
// Speculative decoding buys tokens with verification rows. Whether a row is
// worth it depends on the hardware and the batch: on a GPU, or a CPU step
// bound by reading the weights, an extra row is nearly free; on a CPU whose
// matmuls are compute-bound, each row costs about as much as the tokens a
// large batch already produces per row. The engine prices a row with this
// model instead of a constant tuned for one machine.
//
// Exponentially weighted least squares over recent decode-only steps
// (seconds = fixed + per_row * rows), so the fit follows load changes.
//
// Not thread-safe: the engine thread owns it.
#ifndef PDSERVE_COMMON_ENGINE_STEP_COST_MODEL_H_
#define PDSERVE_COMMON_ENGINE_STEP_COST_MODEL_H_

#include <cstdint>

namespace pdserve {

class StepCostModel {
 public:
  // A decode step of `rows` rows took `seconds`.
  void Observe(int32_t rows, double seconds);
  // True once recent steps had different sizes enough to fit a slope.
  bool ready() const;
  // Seconds one more row adds to a step (>= 0); meaningful when ready().
  double per_row() const;
  // Predicted seconds of a step of `rows` rows (> 0); meaningful when ready().
  double StepSeconds(int32_t rows) const;

 private:
  // Weighted sums of 1, x, x^2, y and x*y over the observations.
  double s0_ = 0, s1_ = 0, s2_ = 0, sy_ = 0, sxy_ = 0;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_STEP_COST_MODEL_H_
