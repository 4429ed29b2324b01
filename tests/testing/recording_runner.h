// Test helper: wraps a runner and keeps a copy of the logits rows it
// returns, so a test can recompute what the engine derived from them (the
// logprobs it reported, the logit of each greedy token).
#ifndef PDSERVE_TESTS_TESTING_RECORDING_RUNNER_H_
#define PDSERVE_TESTS_TESTING_RECORDING_RUNNER_H_

#include <algorithm>
#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "common/engine/model_runner.h"

namespace pdserve::test {

class RecordingRunner : public ModelRunner {
 public:
  // Which rows are copied. Every row's largest logit is always kept; a
  // golden test needs only those and the first row, where every row of
  // Gemma's 262,144-token vocabulary would be 67 MB a 64-token case.
  enum class Keep { kEveryRow, kFirstRow };

  explicit RecordingRunner(ModelRunner* inner, Keep keep = Keep::kEveryRow)
      : inner_(inner), keep_(keep) {}
  const ModelConfig& config() const override { return inner_->config(); }
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache,
                       std::vector<float>* logits) override {
    absl::Status s = inner_->Forward(batch, cache, logits);
    const auto vocab = static_cast<std::ptrdiff_t>(config().n_vocab);
    for (auto row = logits->begin(); s.ok() && logits->end() - row >= vocab; row += vocab) {
      if (keep_ == Keep::kEveryRow || max_logits_.empty()) rows_.emplace_back(row, row + vocab);
      max_logits_.push_back(*std::max_element(row, row + vocab));
    }
    return s;
  }
  const std::vector<std::vector<float>>& rows() const { return rows_; }
  const std::vector<float>& max_logits() const { return max_logits_; }

 private:
  ModelRunner* inner_;
  Keep keep_;
  std::vector<std::vector<float>> rows_;
  std::vector<float> max_logits_;
};

}  // namespace pdserve::test

#endif  // PDSERVE_TESTS_TESTING_RECORDING_RUNNER_H_
