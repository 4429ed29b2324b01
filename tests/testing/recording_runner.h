// Test helper: wraps a runner and keeps a copy of every logits row it
// returns, so a test can recompute what the engine derived from them (the
// logprobs it reported, the logit of each greedy token).
#ifndef PDSERVE_TESTS_TESTING_RECORDING_RUNNER_H_
#define PDSERVE_TESTS_TESTING_RECORDING_RUNNER_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "common/engine/model_runner.h"

namespace pdserve::test {

class RecordingRunner : public ModelRunner {
 public:
  explicit RecordingRunner(ModelRunner* inner) : inner_(inner) {}
  const ModelConfig& config() const override { return inner_->config(); }
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache,
                       std::vector<float>* logits) override {
    absl::Status s = inner_->Forward(batch, cache, logits);
    const auto vocab = static_cast<std::ptrdiff_t>(config().n_vocab);
    for (auto row = logits->begin(); s.ok() && logits->end() - row >= vocab; row += vocab) {
      rows_.emplace_back(row, row + vocab);
    }
    return s;
  }
  const std::vector<std::vector<float>>& rows() const { return rows_; }

 private:
  ModelRunner* inner_;
  std::vector<std::vector<float>> rows_;
};

}  // namespace pdserve::test

#endif  // PDSERVE_TESTS_TESTING_RECORDING_RUNNER_H_
