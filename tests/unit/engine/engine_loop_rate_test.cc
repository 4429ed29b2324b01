// EngineLoop measures the prefill rate it publishes from steps that
// prefilled enough tokens, and a prompt kept out of the prefix cache
// neither uses nor fills it.
#include <memory>

#include "absl/synchronization/notification.h"
#include "common/cpu/cpu_model_runner.h"
#include "common/engine/engine_loop.h"
#include "common/text/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/random_model_util.h"

namespace pdserve {
namespace {

class EngineLoopRateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RandomModelSpec spec;
    spec.n_vocab = 300;
    parts_ = test::LoadEngineParts(spec, 32);
    ASSERT_NE(parts_.model, nullptr);
    runner_ = std::make_unique<CpuModelRunner>(parts_.model->config, &parts_.model->weights, 1);
    loop_ = std::make_unique<EngineLoop>(std::make_unique<Engine>(
        parts_.tokenizer.get(), runner_.get(), parts_.cache.get(), Engine::Options{}));
  }

  // Prefills a prompt of `n` tokens and waits for the load published after it.
  void Prefill(int n, bool use_prefix_cache) {
    SequenceOptions o;
    for (int i = 0; i < n; ++i) o.prompt.push_back(10 + i % 200);
    o.max_tokens = 1;
    o.use_prefix_cache = use_prefix_cache;
    auto done = std::make_shared<absl::Notification>();
    loop_->Post([o, done](Engine& e) {
      ASSERT_TRUE(e.Add(o, [done](const TokenEvent& ev) {
                     if (ev.finish != FinishReason::kNone) done->Notify();
                   }).ok());
    });
    ASSERT_TRUE(done->WaitForNotificationWithTimeout(absl::Seconds(30)));
    absl::Notification published;
    loop_->Post([&](Engine&) { published.Notify(); });
    published.WaitForNotification();
  }

  test::EngineParts parts_;
  std::unique_ptr<CpuModelRunner> runner_;
  std::unique_ptr<EngineLoop> loop_;
};

TEST_F(EngineLoopRateTest, ShortPromptsDoNotSetTheRateLongOnesDo) {
  EXPECT_EQ(loop_->load().prefill_tokens_per_s, 0);
  Prefill(kMinRateSampleTokens - 1, true);
  EXPECT_EQ(loop_->load().prefill_tokens_per_s, 0);
  Prefill(64, true);
  EXPECT_GT(loop_->load().prefill_tokens_per_s, 0);
}

TEST_F(EngineLoopRateTest, APromptOutOfThePrefixCacheLeavesItAlone) {
  Prefill(64, /*use_prefix_cache=*/false);
  EngineLoad load = loop_->load();
  EXPECT_EQ(load.kv_blocks_cached, 0);
  EXPECT_EQ(load.prefix_lookup_tokens, 0);
  Prefill(64, /*use_prefix_cache=*/true);
  load = loop_->load();
  EXPECT_GT(load.kv_blocks_cached, 0);
  EXPECT_EQ(load.prefix_lookup_tokens, 64);
  EXPECT_EQ(load.prefix_hit_tokens, 0);  // the first prompt left nothing to hit
}

}  // namespace
}  // namespace pdserve
