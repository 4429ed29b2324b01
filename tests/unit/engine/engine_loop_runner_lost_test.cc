// EngineLoop tells its worker once when the model runner reports itself
// unusable after a failed step (a lost device), and not for ordinary
// failures of a healthy runner.
#include <atomic>
#include <memory>

#include "absl/synchronization/notification.h"
#include "common/engine/engine_loop.h"
#include "common/text/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/random_model_util.h"

namespace pdserve {
namespace {

// A test-only runner whose every step fails; `lost` says whether it also
// reports the device gone.
class FailingRunner : public ModelRunner {
 public:
  FailingRunner(const ModelConfig& c, bool lost) : config_(c), lost_(lost) {}
  const ModelConfig& config() const override { return config_; }
  absl::Status Forward(const ForwardBatch&, KvCache&, std::vector<float>*) override {
    return absl::InternalError("test: step failed");
  }
  absl::Status Healthy() const override {
    return lost_ ? absl::UnavailableError("test: device lost") : absl::OkStatus();
  }

 private:
  ModelConfig config_;
  bool lost_;
};

class RunnerLostTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    RandomModelSpec spec;
    spec.n_vocab = 300;
    parts_ = test::LoadEngineParts(spec, 32);
    ASSERT_NE(parts_.model, nullptr);
  }
  test::EngineParts parts_;
};

TEST_P(RunnerLostTest, CallbackFiresOnceOnlyForALostRunner) {
  const bool lost = GetParam();
  FailingRunner runner(parts_.model->config, lost);
  EngineLoop loop(std::make_unique<Engine>(parts_.tokenizer.get(), &runner, parts_.cache.get(),
                                           Engine::Options{}));
  std::atomic<int> calls{0};
  loop.OnRunnerLost([&](const absl::Status& why) {
    EXPECT_EQ(why.code(), absl::StatusCode::kUnavailable);
    ++calls;
  });
  // Three sequences, each ended by its failed step.
  for (int i = 0; i < 3; ++i) {
    absl::Notification ended;
    ASSERT_TRUE(loop.Post([&](Engine& e) {
      SequenceOptions o;
      o.prompt = {1, 2, 3};
      o.max_tokens = 4;
      auto id = e.Add(std::move(o), [&](const TokenEvent& ev) {
        if (ev.finish != FinishReason::kNone) ended.Notify();
      });
      EXPECT_TRUE(id.ok()) << id.status();
    }));
    ASSERT_TRUE(ended.WaitForNotificationWithTimeout(absl::Seconds(30)));
  }
  ASSERT_TRUE(loop.WaitIdle(absl::Now() + absl::Seconds(30)));
  loop.Stop();
  EXPECT_EQ(calls.load(), lost ? 1 : 0);
  EXPECT_EQ(parts_.cache->allocator().num_free(), parts_.cache->num_blocks()) << "blocks leaked";
}

INSTANTIATE_TEST_SUITE_P(LostOrNot, RunnerLostTest, ::testing::Bool());

}  // namespace
}  // namespace pdserve
