#include "common/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cpu/cpu_model_runner.h"
#include "common/engine/kv_cache.h"
#include "common/request/token_logprobs.h"
#include "common/text/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/fixed_token_runner.h"
#include "tests/testing/flattened_runner.h"
#include "tests/testing/random_model_util.h"
#include "tests/testing/recording_runner.h"

namespace pdserve {
namespace {

using test::FixedTokenRunner;
using test::FlattenedRunner;
using test::RandomTokens;
using test::RecordingRunner;

constexpr int32_t kBlockSize = 16;

// Events of one sequence, in arrival order.
using Events = std::vector<TokenEvent>;

std::vector<int32_t> Tokens(const Events& ev) {
  std::vector<int32_t> out;
  for (const TokenEvent& e : ev) {
    if (e.token >= 0) out.push_back(e.token);
  }
  return out;
}

// log-softmax of a row, computed apart from the engine's code.
std::vector<double> LogSoftmax(const std::vector<float>& row) {
  const long double max = *std::max_element(row.begin(), row.end());
  long double sum = 0;
  for (float x : row) sum += std::exp(static_cast<long double>(x) - max);
  const long double lse = max + std::log(sum);
  std::vector<double> out;
  for (float x : row) out.push_back(static_cast<double>(static_cast<long double>(x) - lse));
  return out;
}

// Checks one event's logprobs against the raw row the model produced: the
// chosen token's value, and a top of `n` that holds the n largest values,
// sorted, each right, together no more than the whole mass.
void ExpectLogprobsOf(const TokenEvent& e, const std::vector<float>& row, size_t n) {
  ASSERT_TRUE(e.logprobs.has_value());
  const TokenLogprobs& l = *e.logprobs;
  const std::vector<double> expected = LogSoftmax(row);
  EXPECT_EQ(l.token, e.token);
  EXPECT_LE(l.logprob, 0.0f);
  EXPECT_NEAR(l.logprob, expected[static_cast<size_t>(e.token)], 1e-4);
  ASSERT_EQ(l.top.size(), n);
  std::vector<double> sorted = expected;
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  double mass = 0;
  for (size_t j = 0; j < n; ++j) {
    EXPECT_NEAR(l.top[j].logprob, expected[static_cast<size_t>(l.top[j].token)], 1e-4) << j;
    EXPECT_NEAR(l.top[j].logprob, sorted[j], 1e-4) << j;
    if (j > 0) EXPECT_GE(l.top[j - 1].logprob, l.top[j].logprob) << j;
    if (l.top[j].token == l.token) EXPECT_EQ(l.top[j].logprob, l.logprob) << j;
    mass += std::exp(static_cast<double>(l.top[j].logprob));
  }
  EXPECT_LE(mass, 1.0 + 1e-5);
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::LoadTestModel(test::SmallEngineSpec(5));
    ASSERT_NE(model_, nullptr);
    auto tok = Tokenizer::FromGguf(*model_->gguf);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok);
    runner_ = std::make_unique<CpuModelRunner>(model_->config, &model_->weights, 2);
  }

  std::unique_ptr<KvCache> NewCache(int32_t blocks = 64) {
    auto c = KvCache::Create(KvLayout::ForModel(model_->config, kBlockSize), blocks);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }

  // Adds every sequence (recording its events), then steps to completion.
  // `add_later` sequences join after two steps. Returns events by order added.
  std::vector<Events> Generate(const std::vector<SequenceOptions>& seqs, int add_later = 0,
                               Engine::Options opts = {}, ModelRunner* runner = nullptr) {
    auto cache = NewCache();
    const int32_t free_before = cache->allocator().num_free();
    Engine engine(tokenizer_.get(), runner ? runner : runner_.get(), cache.get(), opts);
    std::vector<Events> events(seqs.size());
    auto add = [&](size_t i) {
      auto id = engine.Add(seqs[i], [&events, i](const TokenEvent& e) { events[i].push_back(e); });
      EXPECT_TRUE(id.ok()) << id.status();
    };
    const size_t first_batch = seqs.size() - add_later;
    for (size_t i = 0; i < first_batch; ++i) add(i);
    for (int step = 0; engine.HasWork() || step < 2; ++step) {
      if (step == 2) {
        for (size_t i = first_batch; i < seqs.size(); ++i) add(i);
      }
      const absl::Status s = engine.Step();
      EXPECT_TRUE(s.ok()) << s;
      if (!s.ok() || step > 10000) break;
    }
    EXPECT_EQ(cache->allocator().num_free(), free_before) << "blocks leaked";
    return events;
  }

  SequenceOptions Seq(int prompt_len, int max_tokens, uint64_t seed, bool ignore_eos = true) {
    SequenceOptions o;
    o.prompt = RandomTokens(prompt_len, model_->config.n_vocab, seed);
    o.max_tokens = max_tokens;
    o.ignore_eos = ignore_eos;
    return o;
  }

  std::unique_ptr<test::TestModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<CpuModelRunner> runner_;
};

TEST_F(EngineTest, BatchedGenerationEqualsEachAlone) {
  const std::vector<SequenceOptions> seqs = {Seq(5, 12, 1), Seq(20, 9, 2), Seq(37, 15, 3, false),
                                             Seq(1, 6, 4)};
  std::vector<Events> alone;
  for (const SequenceOptions& s : seqs) alone.push_back(Generate({s})[0]);
  Engine::Options small;
  small.max_batch_tokens = 8;  // prompts are chunked and mixed with decodes
  Engine::Options capped;
  capped.max_prefill_tokens_while_decoding = 3;  // late prompts in 3-token chunks
  for (const auto& batched :
       {Generate(seqs), Generate(seqs, 2), Generate(seqs, 0, small), Generate(seqs, 2, capped)}) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      EXPECT_EQ(Tokens(batched[i]), Tokens(alone[i])) << "sequence " << i;
      ASSERT_FALSE(batched[i].empty());
      EXPECT_EQ(batched[i].back().finish, alone[i].back().finish);
    }
  }
}

TEST_F(EngineTest, MaxTokensIsExact) {
  for (int max_tokens : {1, 2, 7}) {
    const Events ev = Generate({Seq(10, max_tokens, 9)})[0];
    ASSERT_EQ(static_cast<int>(ev.size()), max_tokens);
    for (int i = 0; i < max_tokens; ++i) {
      EXPECT_EQ(ev[i].index, i);
      EXPECT_GE(ev[i].token, 0);
      EXPECT_LT(ev[i].token, model_->config.n_vocab);
      EXPECT_EQ(ev[i].finish, i + 1 == max_tokens ? FinishReason::kLength : FinishReason::kNone);
    }
  }
}

TEST_F(EngineTest, EosEndsGenerationUnlessIgnored) {
  const int32_t eos = tokenizer_->eos_id();
  ASSERT_TRUE(tokenizer_->IsEog(eos));
  FixedTokenRunner runner(model_->config, eos);
  const Events stop = Generate({Seq(4, 10, 1, false)}, 0, {}, &runner)[0];
  ASSERT_EQ(stop.size(), 1u);
  EXPECT_EQ(stop[0].token, eos);
  EXPECT_EQ(stop[0].finish, FinishReason::kEos);
  const Events go_on = Generate({Seq(4, 10, 1, true)}, 0, {}, &runner)[0];
  ASSERT_EQ(go_on.size(), 10u);
  for (const TokenEvent& e : go_on) EXPECT_EQ(e.token, eos);
  EXPECT_EQ(go_on.back().finish, FinishReason::kLength);
}

TEST_F(EngineTest, CancelFreesBlocksAndReportsCancelled) {
  auto cache = NewCache();
  const int32_t initial = cache->allocator().num_free();
  Engine engine(tokenizer_.get(), runner_.get(), cache.get(), {});
  Events a, b;
  auto ida = engine.Add(Seq(30, 40, 1), [&](const TokenEvent& e) { a.push_back(e); });
  auto idb = engine.Add(Seq(8, 40, 2), [&](const TokenEvent& e) { b.push_back(e); });
  ASSERT_TRUE(ida.ok() && idb.ok());
  EXPECT_LT(cache->allocator().num_free(), initial);
  engine.Cancel(*ida);  // still waiting for its prefill
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].token, -1);
  EXPECT_EQ(a[0].finish, FinishReason::kCancelled);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine.Step().ok());
  ASSERT_EQ(b.size(), 3u);
  engine.Cancel(*idb);  // mid-decode
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b.back().token, -1);
  EXPECT_EQ(b.back().finish, FinishReason::kCancelled);
  EXPECT_EQ(b.back().index, 3);
  EXPECT_EQ(cache->allocator().num_free(), initial);
  EXPECT_FALSE(engine.HasWork());
  engine.Cancel(*idb);  // already gone: ignored
  engine.Cancel(12345);
  EXPECT_EQ(b.size(), 4u);
  EXPECT_EQ(a.size(), 1u);
}

// Back pressure: a paused sequence sits out of the batch, keeping its
// blocks, while others go on; resumed, it ends with the tokens it would
// have had unpaused.
TEST_F(EngineTest, PausedSequenceWaitsKeepsItsBlocksAndResumesUnchanged) {
  const std::vector<SequenceOptions> seqs = {Seq(12, 20, 1), Seq(9, 20, 2)};
  const std::vector<Events> want = Generate(seqs);
  auto cache = NewCache();
  const int32_t initial = cache->allocator().num_free();
  Engine engine(tokenizer_.get(), runner_.get(), cache.get(), {});
  Events a, b;
  auto ida = engine.Add(seqs[0], [&](const TokenEvent& e) { a.push_back(e); });
  auto idb = engine.Add(seqs[1], [&](const TokenEvent& e) { b.push_back(e); });
  ASSERT_TRUE(ida.ok() && idb.ok());
  engine.SetPaused(*ida, true);  // still prefilling: ignored
  EXPECT_EQ(engine.num_paused(), 0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine.Step().ok());
  ASSERT_EQ(a.size(), 3u);
  engine.SetPaused(*ida, true);
  EXPECT_EQ(engine.num_paused(), 1);
  const int32_t free_paused = cache->allocator().num_free();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(a.size(), 3u);  // no token while paused
  EXPECT_EQ(b.size(), 8u);
  EXPECT_LE(cache->allocator().num_free(), free_paused);  // its blocks stay
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(b.size(), 20u);
  EXPECT_EQ(a.size(), 3u);
  EXPECT_FALSE(engine.HasWork());  // only a paused sequence is left
  engine.SetPaused(*ida, false);
  EXPECT_TRUE(engine.HasWork());
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(Tokens(a), Tokens(want[0]));
  EXPECT_EQ(Tokens(b), Tokens(want[1]));
  EXPECT_EQ(cache->allocator().num_free(), initial);
}

TEST_F(EngineTest, AdmissionBeyondThePoolChangesNothing) {
  auto cache = NewCache(4);  // 64 token slots
  Engine engine(tokenizer_.get(), runner_.get(), cache.get(), {});
  int calls = 0;
  auto cb = [&](const TokenEvent&) { ++calls; };
  auto first = engine.Add(Seq(30, 20, 1), cb);  // 49 slots -> 4 blocks
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(cache->allocator().num_free(), 0);
  auto second = engine.Add(Seq(2, 2, 2), cb);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(engine.num_sequences(), 1);
  EXPECT_EQ(calls, 0);
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(calls, 20);
  EXPECT_EQ(cache->allocator().num_free(), 4);
  EXPECT_TRUE(engine.Add(Seq(2, 2, 2), cb).ok());  // room again
}

TEST_F(EngineTest, ContextLimit) {
  auto cache = NewCache();
  Engine engine(tokenizer_.get(), runner_.get(), cache.get(), {});
  const int32_t ctx = model_->config.context_length;
  auto over = engine.Add(Seq(ctx - 10, 11, 1), [](const TokenEvent&) {});
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(cache->allocator().num_free(), 64);
  EXPECT_FALSE(engine.HasWork());
  // Exactly the context fits and runs to the end.
  Events ev;
  ASSERT_TRUE(engine.Add(Seq(ctx - 10, 10, 1), [&](const TokenEvent& e) { ev.push_back(e); }).ok());
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  ASSERT_EQ(ev.size(), 10u);
  EXPECT_EQ(ev.back().finish, FinishReason::kLength);
  EXPECT_EQ(cache->allocator().num_free(), 64);
}

TEST_F(EngineTest, InvalidRequestsAreRejectedAndChangeNothing) {
  auto cache = NewCache();
  Engine engine(tokenizer_.get(), runner_.get(), cache.get(), {});
  std::vector<SequenceOptions> bad;
  bad.push_back(Seq(1, 4, 1));
  bad.back().prompt.clear();
  bad.push_back(Seq(5, 4, 1));
  bad.back().prompt[2] = -1;
  bad.push_back(Seq(5, 4, 1));
  bad.back().prompt[4] = model_->config.n_vocab;
  bad.push_back(Seq(5, 0, 1));
  bad.push_back(Seq(5, -3, 1));
  bad.push_back(Seq(5, 4, 1));
  bad.back().sampling.temperature = -1.0f;
  bad.push_back(Seq(5, 4, 1));
  bad.back().sampling.top_p = std::numeric_limits<float>::quiet_NaN();
  bad.push_back(Seq(5, 4, 1));
  bad.back().sampling.top_k = -2;
  bad.push_back(Seq(5, 4, 1));
  bad.back().first_index = -1;
  bad.push_back(Seq(5, 4, 1));
  bad.back().first_index = std::numeric_limits<int32_t>::max();  // indices would overflow
  int calls = 0;
  for (size_t i = 0; i < bad.size(); ++i) {
    auto id = engine.Add(bad[i], [&](const TokenEvent&) { ++calls; });
    ASSERT_FALSE(id.ok()) << "case " << i;
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << i << ": " << id.status();
    EXPECT_FALSE(id.status().message().empty());
  }
  EXPECT_FALSE(engine.HasWork());
  EXPECT_EQ(cache->allocator().num_free(), 64);
  EXPECT_EQ(calls, 0);
  ASSERT_TRUE(engine.Step().ok());  // nothing to do is fine
}

TEST_F(EngineTest, DestructionReleasesBlocksOfUnfinishedSequences) {
  auto cache = NewCache();
  {
    Engine engine(tokenizer_.get(), runner_.get(), cache.get(), {});
    ASSERT_TRUE(engine.Add(Seq(20, 30, 1), [](const TokenEvent&) {}).ok());
    ASSERT_TRUE(engine.Add(Seq(3, 30, 2), [](const TokenEvent&) {}).ok());
    ASSERT_TRUE(engine.Step().ok());
    EXPECT_LT(cache->allocator().num_free(), 64);
  }
  EXPECT_EQ(cache->allocator().num_free(), 64);
}

TEST_F(EngineTest, SeededSamplingIsIndependentOfBatching) {
  FlattenedRunner flat(runner_.get(), 16.0f);
  auto sampled = [&](int len, uint64_t prompt_seed) {
    SequenceOptions o = Seq(len, 16, prompt_seed);
    o.sampling.temperature = 0.8f;
    o.sampling.top_k = 20;
    o.sampling.seed = 7;
    return o;
  };
  const std::vector<SequenceOptions> seqs = {sampled(9, 1), sampled(9, 1), sampled(25, 2),
                                             sampled(3, 3)};
  std::vector<std::vector<int32_t>> alone;
  for (const SequenceOptions& o : seqs) alone.push_back(Tokens(Generate({o}, 0, {}, &flat)[0]));
  const std::vector<int32_t> greedy = Tokens(Generate({Seq(9, 16, 1)}, 0, {}, &flat)[0]);
  EXPECT_NE(alone[0], greedy) << "temperature 0.8 should not be greedy every time";
  EXPECT_GE(std::set<int32_t>(alone[0].begin(), alone[0].end()).size(), 4u)
      << "sampled tokens should vary, or this test proves little";
  EXPECT_EQ(alone[1], alone[0]);  // same prompt and seed, same tokens
  Engine::Options small;
  small.max_batch_tokens = 8;
  for (const auto& batched : {Generate(seqs, 0, {}, &flat), Generate(seqs, 1, {}, &flat),
                              Generate(seqs, 0, small, &flat)}) {
    for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(Tokens(batched[i]), alone[i]) << i;
  }
}

// "Running" is what the next step takes: prefill chunks within the token
// budget, decode tokens within max_running; everything else waits.
TEST_F(EngineTest, RunningAndWaitingCountTheNextStepsBatch) {
  auto cache = NewCache();
  Engine::Options opts;
  opts.max_batch_tokens = 16;
  Engine engine(tokenizer_.get(), runner_.get(), cache.get(), opts);
  ASSERT_TRUE(engine.Add(Seq(40, 3, 1), [](const TokenEvent&) {}).ok());
  ASSERT_TRUE(engine.Add(Seq(4, 3, 2), [](const TokenEvent&) {}).ok());
  EXPECT_EQ(engine.num_running(), 1);  // 16 tokens of the first prompt only
  EXPECT_EQ(engine.num_waiting(), 1);
  ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(engine.num_running(), 1);
  ASSERT_TRUE(engine.Step().ok());  // next: the first's last 8 + the second's 4
  EXPECT_EQ(engine.num_running(), 2);
  EXPECT_EQ(engine.num_waiting(), 0);
  ASSERT_TRUE(engine.Step().ok());  // both decode now
  EXPECT_EQ(engine.num_running(), 2);
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(engine.num_running(), 0);
  EXPECT_EQ(engine.num_waiting(), 0);
}

// While a sequence decodes, a new prompt is prefilled in chunks of at most
// max_prefill_tokens_while_decoding, so the decoding one gets a token every
// (short) step; with nothing decoding a prompt takes the whole budget.
TEST_F(EngineTest, PrefillChunksAreCappedWhileOthersDecode) {
  auto cache = NewCache();
  Engine::Options opts;
  opts.max_batch_tokens = 64;
  opts.max_prefill_tokens_while_decoding = 8;
  Engine engine(tokenizer_.get(), runner_.get(), cache.get(), opts);
  std::vector<int> tokens(2, 0);
  auto count = [&tokens](int i) {
    return [&tokens, i](const TokenEvent& e) {
      if (e.token >= 0) ++tokens[i];
    };
  };
  ASSERT_TRUE(engine.Add(Seq(40, 20, 1), count(0)).ok());
  ASSERT_TRUE(engine.Step().ok());  // all 40 prompt tokens at once: nothing decodes
  EXPECT_EQ(tokens[0], 1);
  ASSERT_TRUE(engine.Add(Seq(40, 3, 2), count(1)).ok());
  for (int step = 0; step < 4; ++step) {  // 8 of its 40 prompt tokens per step
    ASSERT_TRUE(engine.Step().ok());
    EXPECT_EQ(tokens[1], 0) << step;
  }
  ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(tokens[1], 1);
  EXPECT_EQ(tokens[0], 6);  // one token in each of the five steps
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
}

// Past max_running a finished prompt waits for a slot, and is counted so.
TEST_F(EngineTest, MaxRunningCapsTheBatchAndTheRunningCount) {
  auto cache = NewCache();
  Engine::Options opts;
  opts.max_running = 1;
  Engine engine(tokenizer_.get(), runner_.get(), cache.get(), opts);
  std::vector<int> tokens(2, 0);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(engine
                    .Add(Seq(4, 3, i + 1),
                         [&tokens, i](const TokenEvent& e) {
                           if (e.token >= 0) ++tokens[i];
                         })
                    .ok());
  }
  for (int step = 0; step < 3; ++step) {  // the first: prefill + 2 decode tokens
    EXPECT_EQ(engine.num_running(), 1) << step;
    EXPECT_EQ(engine.num_waiting(), 1) << step;
    ASSERT_TRUE(engine.Step().ok());
  }
  EXPECT_EQ(tokens[0], 3);
  EXPECT_EQ(tokens[1], 0);
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(tokens[1], 3);
  EXPECT_EQ(engine.num_running() + engine.num_waiting(), 0);
}

// Greedy: each token's logprob is the log-softmax of its raw logits row,
// and it is the top entry (the greedy token is the first maximum).
TEST_F(EngineTest, LogprobsOfGreedyTokens) {
  RecordingRunner recording(runner_.get());
  SequenceOptions o = Seq(10, 6, 1);
  o.sampling.logprobs = 5;
  const Events ev = Generate({o}, 0, {}, &recording)[0];
  ASSERT_EQ(ev.size(), 6u);
  ASSERT_EQ(recording.rows().size(), ev.size());  // one sequence: one row per step
  for (size_t i = 0; i < ev.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_NO_FATAL_FAILURE(ExpectLogprobsOf(ev[i], recording.rows()[i], 5));
    EXPECT_EQ(ev[i].logprobs->top[0].token, ev[i].token);
  }
}

// Sampled with penalties and a temperature: the logprobs are still those of
// the raw rows (not of the penalized, scaled ones Sample draws from), and
// asking for them changes no token.
TEST_F(EngineTest, LogprobsAreTheModelsAndDoNotChangeSampling) {
  FlattenedRunner flat(runner_.get(), 16.0f);
  RecordingRunner recording(&flat);
  SequenceOptions o = Seq(9, 12, 1);
  o.sampling.temperature = 0.8f;
  o.sampling.repetition_penalty = 1.3f;
  o.sampling.presence_penalty = 0.5f;
  o.sampling.seed = 7;
  const std::vector<int32_t> plain = Tokens(Generate({o}, 0, {}, &flat)[0]);
  o.sampling.logprobs = 3;
  const Events ev = Generate({o}, 0, {}, &recording)[0];
  EXPECT_EQ(Tokens(ev), plain);
  ASSERT_EQ(recording.rows().size(), ev.size());
  for (size_t i = 0; i < ev.size(); ++i) {
    SCOPED_TRACE(i);
    ExpectLogprobsOf(ev[i], recording.rows()[i], 3);
  }
}

// Only a sequence that asks pays: in one batch, the other gets none; 0 asks
// for the chosen token's logprob alone.
TEST_F(EngineTest, LogprobsOnlyWhenRequested) {
  SequenceOptions asked = Seq(7, 4, 1);
  asked.sampling.logprobs = 0;
  const std::vector<Events> ev = Generate({asked, Seq(12, 4, 2)});
  ASSERT_EQ(ev[0].size(), 4u);
  for (const TokenEvent& e : ev[0]) {
    ASSERT_TRUE(e.logprobs.has_value());
    EXPECT_EQ(e.logprobs->token, e.token);
    EXPECT_LE(e.logprobs->logprob, 0.0f);
    EXPECT_TRUE(e.logprobs->top.empty());
  }
  ASSERT_EQ(ev[1].size(), 4u);
  for (const TokenEvent& e : ev[1]) EXPECT_FALSE(e.logprobs.has_value());
}

// The prefill worker's logprobs of the first token reach its event, if the
// sequence asked for them and they are for that token; later tokens get
// the decode engine's own.
TEST_F(EngineTest, CommitPrefilledEmitsTheFirstTokensLogprobs) {
  auto cache = NewCache();
  Engine engine(tokenizer_.get(), runner_.get(), cache.get(), {});
  auto reserve = [&](int32_t logprobs, Events* ev) -> int64_t {
    SequenceOptions o = Seq(8, 2, 1);
    o.sampling.logprobs = logprobs;
    absl::StatusOr<int64_t> id = engine.Reserve(o, [ev](const TokenEvent& e) { ev->push_back(e); });
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  };
  TokenLogprobs first;
  first.token = 5;
  first.logprob = -0.5f;
  first.top = {{5, -0.5f}, {9, -1.25f}};
  TokenLogprobs other_token = first;
  other_token.token = 6;
  Events asked, mismatched, not_asked, none_sent;
  ASSERT_TRUE(engine.CommitPrefilled(reserve(2, &asked), 5, first).ok());
  ASSERT_TRUE(engine.CommitPrefilled(reserve(2, &mismatched), 5, other_token).ok());
  ASSERT_TRUE(engine.CommitPrefilled(reserve(-1, &not_asked), 5, first).ok());
  ASSERT_TRUE(engine.CommitPrefilled(reserve(2, &none_sent), 5, std::nullopt).ok());
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].token, 5);
  EXPECT_EQ(asked[0].logprobs, first);
  for (const Events* ev : {&mismatched, &not_asked, &none_sent}) {
    ASSERT_EQ(ev->size(), 1u);
    EXPECT_EQ((*ev)[0].token, 5);
    EXPECT_FALSE((*ev)[0].logprobs.has_value());
  }
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  ASSERT_EQ(asked.size(), 2u);
  ASSERT_TRUE(asked[1].logprobs.has_value());
  EXPECT_EQ(asked[1].logprobs->token, asked[1].token);
  EXPECT_EQ(asked[1].logprobs->top.size(), 2u);
  ASSERT_EQ(none_sent.size(), 2u);
  EXPECT_TRUE(none_sent[1].logprobs.has_value());
  ASSERT_EQ(not_asked.size(), 2u);
  EXPECT_FALSE(not_asked[1].logprobs.has_value());
}

}  // namespace
}  // namespace pdserve
