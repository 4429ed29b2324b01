// Test helper: a runner that divides another's logits by a constant.
// Random models have very peaked logits (a temperature-0.8 sample is almost
// always the argmax, and greedy output repeats one token); flatter logits
// make seeded sampling pick varied tokens, so the generated text depends on
// every earlier logit row and any difference in the KV a sequence reads, or
// any cross-sequence mix-up, shows.
#ifndef PDSERVE_TESTS_TESTING_FLATTENED_RUNNER_H_
#define PDSERVE_TESTS_TESTING_FLATTENED_RUNNER_H_

#include <vector>

#include "absl/status/status.h"
#include "common/engine/model_runner.h"

namespace pdserve::test {

class FlattenedRunner : public ModelRunner {
 public:
  explicit FlattenedRunner(ModelRunner* inner, float divisor = 16.0f)
      : inner_(inner), divisor_(divisor) {}
  const ModelConfig& config() const override { return inner_->config(); }
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache,
                       std::vector<float>* logits) override {
    absl::Status s = inner_->Forward(batch, cache, logits);
    for (float& x : *logits) x /= divisor_;
    return s;
  }

 private:
  ModelRunner* inner_;
  float divisor_;
};

}  // namespace pdserve::test

#endif  // PDSERVE_TESTS_TESTING_FLATTENED_RUNNER_H_
