#include "common/engine/step_cost_model.h"

#include <algorithm>

namespace pdserve {
namespace {

// Each step's weight decays by this per later step: about the last 30
// steps count.
constexpr double kDecay = 0.97;
// Weighted variance of the row counts below which the slope is noise.
constexpr double kMinRowVariance = 0.25;

}  // namespace

void StepCostModel::Observe(int32_t rows, double seconds) {
  const double x = rows;
  s0_ = kDecay * s0_ + 1;
  s1_ = kDecay * s1_ + x;
  s2_ = kDecay * s2_ + x * x;
  sy_ = kDecay * sy_ + seconds;
  sxy_ = kDecay * sxy_ + x * seconds;
}

bool StepCostModel::ready() const {
  if (s0_ < 2) return false;
  const double mean = s1_ / s0_;
  return s2_ / s0_ - mean * mean >= kMinRowVariance;
}

double StepCostModel::per_row() const {
  const double det = s0_ * s2_ - s1_ * s1_;
  if (det <= 0) return 0;
  return std::max(0.0, (s0_ * sxy_ - s1_ * sy_) / det);
}

double StepCostModel::StepSeconds(int32_t rows) const {
  if (s0_ <= 0) return 0;
  const double slope = per_row();
  const double fixed = (sy_ - slope * s1_) / s0_;
  // A negative intercept is a fit to noisy small steps: a step costs at
  // least its rows.
  return std::max(fixed + slope * rows, slope * rows);
}

}  // namespace pdserve
