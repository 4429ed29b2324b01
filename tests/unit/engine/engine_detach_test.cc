// Engine::Detach, the engine's half of KV migration: a decoding sequence
// taken out between two steps, its KV copied into another engine's
// reservation and committed with the last token it emitted, continues
// there with exactly the tokens it would have produced where it was —
// greedy or seeded sampling — and its source gives every block back.
#include <cstring>
#include <memory>
#include <vector>

#include "common/cpu/cpu_model_runner.h"
#include "common/engine/engine.h"
#include "common/engine/kv_cache.h"
#include "common/text/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/random_model_util.h"

namespace pdserve {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kPrompt = 40;
constexpr int32_t kMaxTokens = 30;

class EngineDetachTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    model_ = test::LoadTestModel(test::SmallEngineSpec(5));
    ASSERT_NE(model_, nullptr);
    auto tok = Tokenizer::FromGguf(*model_->gguf);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok);
    runner_ = std::make_unique<CpuModelRunner>(model_->config, &model_->weights, 2);
    source_ = NewCache();
    target_ = NewCache();
  }

  std::unique_ptr<KvCache> NewCache() {
    auto c = KvCache::Create(KvLayout::ForModel(model_->config, kBlockSize), 64);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }

  SequenceOptions Options() const {
    SequenceOptions o;
    o.prompt = test::RandomTokens(kPrompt, model_->config.n_vocab, 11);
    o.max_tokens = kMaxTokens;
    o.ignore_eos = true;
    if (GetParam()) {  // seeded sampling
      o.sampling.temperature = 0.9f;
      o.sampling.seed = 77;
    }
    return o;
  }

  std::unique_ptr<test::TestModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<CpuModelRunner> runner_;
  std::unique_ptr<KvCache> source_;
  std::unique_ptr<KvCache> target_;
};

// The tokens a sequence emits, by index.
std::vector<int32_t> RunToEnd(Engine& engine, std::vector<TokenEvent>* events) {
  while (engine.HasWork()) EXPECT_TRUE(engine.Step().ok());
  std::vector<int32_t> tokens;
  for (const TokenEvent& e : *events) {
    if (e.token >= 0) tokens.push_back(e.token);
  }
  return tokens;
}

TEST_P(EngineDetachTest, ADetachedSequenceContinuesIdenticallyElsewhere) {
  // Undisturbed.
  std::vector<int32_t> want;
  {
    auto cache = NewCache();
    Engine engine(tokenizer_.get(), runner_.get(), cache.get(), {});
    std::vector<TokenEvent> events;
    ASSERT_TRUE(engine.Add(Options(), [&](const TokenEvent& e) { events.push_back(e); }).ok());
    want = RunToEnd(engine, &events);
    ASSERT_EQ(want.size(), static_cast<size_t>(kMaxTokens));
  }

  // On the source, until 12 tokens are out; then detached.
  const int32_t free_before = source_->allocator().num_free();
  Engine source(tokenizer_.get(), runner_.get(), source_.get(), {});
  std::vector<TokenEvent> source_events;
  absl::StatusOr<int64_t> id =
      source.Add(Options(), [&](const TokenEvent& e) { source_events.push_back(e); });
  ASSERT_TRUE(id.ok());
  while (source_events.size() < 12) ASSERT_TRUE(source.Step().ok());
  ASSERT_EQ(source_events.size(), 12u);
  absl::StatusOr<Engine::Detached> d = source.Detach(*id);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(source_events.size(), 12u) << "detaching emits nothing";
  EXPECT_FALSE(source.HasWork());
  EXPECT_EQ(d->generated, 12);
  EXPECT_EQ(d->kv_tokens, kPrompt + 11);
  EXPECT_EQ(d->last_token, want[11]);

  // On the target: a reservation for prompt + the first 11 tokens, the KV
  // copied in (what the data plane does), committed with the 12th.
  Engine target(tokenizer_.get(), runner_.get(), target_.get(), {});
  SequenceOptions cont = Options();
  cont.prompt.insert(cont.prompt.end(), want.begin(), want.begin() + 11);
  cont.max_tokens = kMaxTokens - 11;
  cont.first_index = 11;
  std::vector<TokenEvent> target_events;
  absl::StatusOr<int64_t> tid =
      target.Reserve(cont, [&](const TokenEvent& e) { target_events.push_back(e); });
  ASSERT_TRUE(tid.ok()) << tid.status();
  const std::vector<int32_t> blocks = target.BlocksOf(*tid);
  const KvLayout& layout = source_->layout();
  for (int l = 0; l < layout.n_layers; ++l) {
    for (int32_t b = 0; b < BlocksForTokens(d->kv_tokens, kBlockSize); ++b) {
      std::memcpy(target_->LayerBlock(l, blocks[b]), source_->LayerBlock(l, d->blocks[b]),
                  layout.bytes_per_layer_block());
    }
  }
  ASSERT_TRUE(target.CommitPrefilled(*tid, d->last_token, std::nullopt).ok());
  const std::vector<int32_t> got = RunToEnd(target, &target_events);
  ASSERT_FALSE(target_events.empty());
  EXPECT_EQ(target_events.front().index, 11);
  EXPECT_EQ(got, std::vector<int32_t>(want.begin() + 11, want.end()));

  source.FreeBlocks(d->blocks);
  EXPECT_EQ(source_->allocator().num_free(), free_before) << "blocks leaked";
}

INSTANTIATE_TEST_SUITE_P(GreedyAndSeeded, EngineDetachTest, ::testing::Bool());

class EngineDetachRefusalTest : public EngineDetachTest {};

TEST_P(EngineDetachRefusalTest, OnlyADecodingSequenceIsDetached) {
  Engine engine(tokenizer_.get(), runner_.get(), source_.get(), {});
  const int32_t free_before = source_->allocator().num_free();
  absl::StatusOr<int64_t> waiting = engine.Reserve(Options(), [](const TokenEvent&) {});
  ASSERT_TRUE(waiting.ok());
  EXPECT_EQ(engine.Detach(*waiting).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine.Detach(12345).status().code(), absl::StatusCode::kNotFound);
  // A refused detach changes nothing: the sequence still holds its blocks.
  EXPECT_FALSE(engine.BlocksOf(*waiting).empty());
  engine.Cancel(*waiting);
  EXPECT_EQ(source_->allocator().num_free(), free_before);
}

INSTANTIATE_TEST_SUITE_P(Greedy, EngineDetachRefusalTest, ::testing::Values(false));

}  // namespace
}  // namespace pdserve
