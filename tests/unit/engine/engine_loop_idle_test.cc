// EngineLoop::WaitIdle judges a load published after it was called: a
// sequence admitted an instant before (a request that raced a drain) keeps
// it waiting even while the published load still reads idle.
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/cpu/cpu_model_runner.h"
#include "common/engine/engine_loop.h"
#include "common/text/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/random_model_util.h"

namespace pdserve {
namespace {

// A test-only runner that holds every forward pass until the gate opens,
// then runs the real CPU runner: while it is held, the engine thread
// publishes nothing, so the published load is the one from before.
class GatedRunner : public ModelRunner {
 public:
  GatedRunner(const ModelConfig& c, const ModelWeights* w) : cpu_(c, w, 1) {}
  const ModelConfig& config() const override { return cpu_.config(); }
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache,
                       std::vector<float>* logits) override {
    if (!entered_.HasBeenNotified()) entered_.Notify();  // engine thread only
    gate_.WaitForNotification();
    return cpu_.Forward(batch, cache, logits);
  }
  void AwaitEntered() { entered_.WaitForNotification(); }
  void Open() { gate_.Notify(); }

 private:
  CpuModelRunner cpu_;
  absl::Notification entered_;
  absl::Notification gate_;
};

TEST(EngineLoopIdleTest, ASequenceAdmittedJustBeforeIsWaitedFor) {
  RandomModelSpec spec;
  spec.n_vocab = 300;
  test::EngineParts parts = test::LoadEngineParts(spec, 32);
  ASSERT_NE(parts.model, nullptr);
  GatedRunner runner(parts.model->config, &parts.model->weights);
  EngineLoop loop(std::make_unique<Engine>(parts.tokenizer.get(), &runner, parts.cache.get(),
                                           Engine::Options{}));
  ASSERT_EQ(loop.load().running + loop.load().waiting, 0);
  absl::Notification ended;
  ASSERT_TRUE(loop.Post([&](Engine& e) {
    SequenceOptions o;
    o.prompt = {1, 2, 3};
    o.max_tokens = 2;
    ASSERT_TRUE(e.Add(std::move(o), [&](const TokenEvent& ev) {
                   if (ev.finish != FinishReason::kNone) ended.Notify();
                 }).ok());
  }));
  runner.AwaitEntered();
  // The engine thread is inside the sequence's first step; the last load it
  // published (before the admission) says idle.
  EXPECT_EQ(loop.load().running + loop.load().waiting, 0);
  EXPECT_FALSE(loop.WaitIdle(absl::Now() + absl::Milliseconds(50)));
  runner.Open();
  ASSERT_TRUE(ended.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(loop.WaitIdle(absl::Now() + absl::Seconds(30)));
  loop.Stop();
  EXPECT_EQ(parts.cache->allocator().num_free(), parts.cache->num_blocks()) << "blocks leaked";
}

// Idle is confirmed on a fresh publish, not assumed from the old one.
TEST(EngineLoopIdleTest, AnIdleLoopIsIdle) {
  RandomModelSpec spec;
  spec.n_vocab = 300;
  test::EngineParts parts = test::LoadEngineParts(spec, 32);
  ASSERT_NE(parts.model, nullptr);
  CpuModelRunner runner(parts.model->config, &parts.model->weights, 1);
  EngineLoop loop(std::make_unique<Engine>(parts.tokenizer.get(), &runner, parts.cache.get(),
                                           Engine::Options{}));
  EXPECT_TRUE(loop.WaitIdle(absl::Now() + absl::Seconds(30)));
  EXPECT_TRUE(loop.WaitIdle(absl::Now() + absl::Seconds(30)));
  loop.Stop();
  // A stopped loop answers from its last published load.
  EXPECT_TRUE(loop.WaitIdle(absl::Now() + absl::Seconds(1)));
}

}  // namespace
}  // namespace pdserve
