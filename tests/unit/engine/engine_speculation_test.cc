// Speculative decoding in the engine (common/engine/speculation.h): drafts
// verified in the batch must change how many steps a sequence takes, never
// its tokens, finish, logprobs or the KV pool, whatever the drafts' quality,
// the sampling settings, the KV dtype, windows or the prefix cache.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cpu/cpu_model_runner.h"
#include "common/engine/engine.h"
#include "common/engine/kv_cache.h"
#include "common/engine/model_runner.h"
#include "common/text/tokenizer.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "tests/testing/flattened_runner.h"
#include "tests/testing/random_model_util.h"

namespace pdserve {
namespace {

using test::RandomTokens;

constexpr int32_t kBlockSize = 16;

// Calls f(row, pos) for each logit row of `batch`: its index in the logits
// and the position of the token it was computed at.
template <typename F>
void ForEachLogitRow(const ForwardBatch& batch, F f) {
  size_t row = 0;
  for (const SequenceChunk& ch : batch.chunks) {
    if (!ch.want_logits) continue;
    const int32_t end = ch.start_pos + static_cast<int32_t>(ch.tokens.size());
    for (int32_t pos = end - ch.logit_rows; pos < end; ++pos, ++row) f(row, pos);
  }
}

// Adds a large bias to one token at every fourth position, chosen by the
// position alone: greedy text on a random model, which otherwise settles
// into copying, then departs from what a draft copied at known places, so
// drafts are refused as well as kept. Speculation on and off see the same
// logits for the same position.
class PositionBiasRunner : public ModelRunner {
 public:
  explicit PositionBiasRunner(ModelRunner* inner) : inner_(inner) {}
  const ModelConfig& config() const override { return inner_->config(); }
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache,
                       std::vector<float>* logits) override {
    absl::Status s = inner_->Forward(batch, cache, logits);
    if (!s.ok()) return s;
    const int32_t vocab = config().n_vocab;
    int32_t rows_in_step = 0;
    ForEachLogitRow(batch, [&](size_t row, int32_t pos) {
      ++rows_in_step;
      if (pos % 4 == 0) (*logits)[row * vocab + (pos * 31 + 7) % vocab] += 100.0f;
    });
    max_rows_ = std::max(max_rows_, rows_in_step);
    return s;
  }
  // The most logit rows one step asked for.
  int32_t max_rows() const { return max_rows_; }

 private:
  ModelRunner* inner_;
  int32_t max_rows_ = 0;
};

// Takes fixed + per_row * rows of wall time per step (sleeping), so the
// engine's step-cost model sees a machine where rows are dear or cheap.
class TimedRunner : public ModelRunner {
 public:
  TimedRunner(ModelRunner* inner, absl::Duration fixed, absl::Duration per_row)
      : inner_(inner), fixed_(fixed), per_row_(per_row) {}
  const ModelConfig& config() const override { return inner_->config(); }
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache,
                       std::vector<float>* logits) override {
    int64_t rows = 0;
    for (const SequenceChunk& ch : batch.chunks) rows += static_cast<int64_t>(ch.tokens.size());
    absl::SleepFor(fixed_ + per_row_ * rows);
    return inner_->Forward(batch, cache, logits);
  }

 private:
  ModelRunner* inner_;
  absl::Duration fixed_, per_row_;
};

// Steers greedy text to `script` (prompt then output, by position): every
// logit row gets a bias of 100 on the token the script holds next.
class ScriptRunner : public ModelRunner {
 public:
  ScriptRunner(ModelRunner* inner, std::vector<int32_t> script)
      : inner_(inner), script_(std::move(script)) {}
  const ModelConfig& config() const override { return inner_->config(); }
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache,
                       std::vector<float>* logits) override {
    absl::Status s = inner_->Forward(batch, cache, logits);
    if (!s.ok()) return s;
    const int32_t vocab = config().n_vocab;
    ForEachLogitRow(batch, [&](size_t row, int32_t pos) {
      const auto next = static_cast<size_t>(pos + 1);
      if (next < script_.size()) (*logits)[row * vocab + script_[next]] += 100.0f;
    });
    return s;
  }

 private:
  ModelRunner* inner_;
  std::vector<int32_t> script_;
};

// A request that answers `prompt` with `answer` (ignoring EOS), and the
// runner that makes the model write exactly that.
struct ScriptedAnswer {
  static std::vector<int32_t> Script(std::vector<int32_t> prompt,
                                     const std::vector<int32_t>& answer) {
    prompt.insert(prompt.end(), answer.begin(), answer.end());
    return prompt;
  }
  ScriptedAnswer(ModelRunner* inner, const std::vector<int32_t>& prompt,
                 const std::vector<int32_t>& answer)
      : runner(inner, Script(prompt, answer)) {
    options.prompt = prompt;
    options.max_tokens = static_cast<int32_t>(answer.size());
    options.ignore_eos = true;
  }

  ScriptRunner runner;
  SequenceOptions options;
};

struct Outcome {
  std::vector<std::vector<TokenEvent>> events;  // per sequence, in order
  SpeculationStats stats;
  int64_t steps = 0;
};

std::vector<int32_t> TokensOf(const std::vector<TokenEvent>& events) {
  std::vector<int32_t> out;
  for (const TokenEvent& e : events) {
    if (e.token >= 0) out.push_back(e.token);
  }
  return out;
}

// The same request with speculation on and off must produce the same events.
void ExpectSameEvents(const Outcome& off, const Outcome& on) {
  ASSERT_EQ(off.events.size(), on.events.size());
  for (size_t i = 0; i < off.events.size(); ++i) {
    const auto& a = off.events[i];
    const auto& b = on.events[i];
    ASSERT_EQ(TokensOf(a), TokensOf(b)) << "sequence " << i;
    ASSERT_EQ(a.size(), b.size()) << "sequence " << i;
    for (size_t j = 0; j < a.size(); ++j) {
      EXPECT_EQ(a[j].index, b[j].index) << "sequence " << i << " event " << j;
      EXPECT_EQ(a[j].finish, b[j].finish) << "sequence " << i << " event " << j;
      ASSERT_EQ(a[j].logprobs.has_value(), b[j].logprobs.has_value());
      if (!a[j].logprobs.has_value()) continue;
      EXPECT_EQ(a[j].logprobs->logprob, b[j].logprobs->logprob);
      ASSERT_EQ(a[j].logprobs->top.size(), b[j].logprobs->top.size());
      for (size_t t = 0; t < a[j].logprobs->top.size(); ++t) {
        EXPECT_EQ(a[j].logprobs->top[t].token, b[j].logprobs->top[t].token);
      }
    }
  }
}

class EngineSpeculationTest : public ::testing::Test {
 protected:
  void SetUp() override { Load(test::SmallEngineSpec(5, 256)); }

  void Load(const RandomModelSpec& spec) {
    model_ = test::LoadTestModel(spec);
    ASSERT_NE(model_, nullptr);
    auto tok = Tokenizer::FromGguf(*model_->gguf);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok);
    runner_ = std::make_unique<CpuModelRunner>(model_->config, &model_->weights, 2);
  }

  // Runs every sequence to its end, all admitted up front. Rows are not
  // priced by time unless a test asks (RowsArePricedByWhatTheyCost): the
  // other tests' draft counts must not depend on this machine's load.
  Outcome Run(const std::vector<SequenceOptions>& seqs, Engine::Options opts,
              ModelRunner* runner = nullptr, const std::string& dtype = "f16",
              bool price_rows = false) {
    opts.speculation.price_rows = price_rows;
    Outcome out;
    auto cache = KvCache::Create(KvLayout::ForModel(model_->config, kBlockSize, dtype), 96);
    EXPECT_TRUE(cache.ok()) << cache.status();
    if (!cache.ok()) return out;
    const int32_t free_before = (*cache)->allocator().num_free();
    {
      Engine engine(tokenizer_.get(), runner ? runner : runner_.get(), cache->get(), opts);
      out.events.resize(seqs.size());
      for (size_t i = 0; i < seqs.size(); ++i) {
        auto id = engine.Add(seqs[i], [&out, i](const TokenEvent& e) { out.events[i].push_back(e); });
        EXPECT_TRUE(id.ok()) << id.status();
      }
      for (; engine.HasWork() && out.steps < 5000; ++out.steps) {
        const absl::Status s = engine.Step();
        EXPECT_TRUE(s.ok()) << s;
        if (!s.ok()) break;
      }
      out.stats = engine.speculation_stats();
    }
    EXPECT_EQ((*cache)->allocator().num_free(), free_before) << "blocks leaked";
    return out;
  }

  // Speculation off and on (all else equal); both outcomes.
  std::pair<Outcome, Outcome> RunBoth(const std::vector<SequenceOptions>& seqs,
                                      Engine::Options opts = {}, ModelRunner* runner = nullptr,
                                      const std::string& dtype = "f16") {
    opts.speculation.enabled = false;
    Outcome off = Run(seqs, opts, runner, dtype);
    opts.speculation.enabled = true;
    Outcome on = Run(seqs, opts, runner, dtype);
    return {std::move(off), std::move(on)};
  }

  // A prompt that repeats a random span, so that drafts have something to
  // copy, and whose generated text (on a random model) often repeats too.
  SequenceOptions CopyPrompt(int span, int repeats, int max_tokens, uint64_t seed) {
    SequenceOptions o;
    const std::vector<int32_t> s = RandomTokens(span, model_->config.n_vocab, seed);
    for (int r = 0; r < repeats; ++r) o.prompt.insert(o.prompt.end(), s.begin(), s.end());
    o.prompt.push_back(s[0]);
    o.max_tokens = max_tokens;
    o.ignore_eos = true;
    return o;
  }

  static int64_t Drafted(const SpeculationStats& s) {
    return s.source[static_cast<int>(DraftSource::kPromptLookup)].drafted;
  }
  static int64_t Accepted(const SpeculationStats& s) {
    return s.source[static_cast<int>(DraftSource::kPromptLookup)].accepted;
  }

  std::unique_ptr<test::TestModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<CpuModelRunner> runner_;
};

TEST_F(EngineSpeculationTest, RunnerGivesEveryRowItsOwnLogits) {
  // Four tokens with logit_rows = 4 against the same tokens one at a time:
  // the verification rows are exactly the logits plain decode would see.
  const std::vector<int32_t> tokens = RandomTokens(20, model_->config.n_vocab, 3);
  auto a = KvCache::Create(KvLayout::ForModel(model_->config, kBlockSize), 8);
  auto b = KvCache::Create(KvLayout::ForModel(model_->config, kBlockSize), 8);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<int32_t> blocks = {0, 1};
  std::vector<float> together, alone, row;
  ForwardBatch prefix;
  prefix.chunks.push_back({absl::MakeConstSpan(tokens).subspan(0, 16), 0, blocks, false});
  ASSERT_TRUE(runner_->Forward(prefix, **a, &row).ok());
  ASSERT_TRUE(runner_->Forward(prefix, **b, &row).ok());
  ForwardBatch four;
  four.chunks.push_back({absl::MakeConstSpan(tokens).subspan(16, 4), 16, blocks, true, 4});
  ASSERT_TRUE(runner_->Forward(four, **a, &together).ok());
  for (int i = 16; i < 20; ++i) {
    ForwardBatch one;
    one.chunks.push_back({absl::MakeConstSpan(tokens).subspan(i, 1), i, blocks, true});
    ASSERT_TRUE(runner_->Forward(one, **b, &row).ok());
    alone.insert(alone.end(), row.begin(), row.end());
  }
  EXPECT_EQ(together, alone);
}

TEST_F(EngineSpeculationTest, LogitRowsOutsideTheChunkAreRefused) {
  auto cache = KvCache::Create(KvLayout::ForModel(model_->config, kBlockSize), 8);
  ASSERT_TRUE(cache.ok());
  const std::vector<int32_t> tokens = {5, 6, 7};
  const std::vector<int32_t> blocks = {0};
  std::vector<float> logits;
  for (int rows : {0, 4, -1}) {
    ForwardBatch batch;
    batch.chunks.push_back({tokens, 0, blocks, true, rows});
    EXPECT_EQ(runner_->Forward(batch, **cache, &logits).code(), absl::StatusCode::kInvalidArgument)
        << rows;
  }
}

TEST_F(EngineSpeculationTest, GreedyOutputIsUnchangedAndDraftsAreKept) {
  std::vector<SequenceOptions> seqs;
  for (int i = 0; i < 4; ++i) seqs.push_back(CopyPrompt(12 + i, 3, 60, 100 + i));
  seqs.push_back(CopyPrompt(9, 1, 33, 7));  // a short one that ends first
  PositionBiasRunner biased(runner_.get());
  const auto [off, on] = RunBoth(seqs, {}, &biased);
  ExpectSameEvents(off, on);
  EXPECT_EQ(Drafted(off.stats), 0);
  // Both verification outcomes happened: drafts kept and drafts refused.
  EXPECT_GT(Accepted(on.stats), 0);
  EXPECT_LT(Accepted(on.stats), Drafted(on.stats));
  EXPECT_LT(on.steps, off.steps);
  EXPECT_GT(on.stats.tokens, on.stats.steps);
}

TEST_F(EngineSpeculationTest, SeededSamplingIsUnchangedForEverySeed) {
  // Many seeds over flattened logits: every sampled stream, with penalties,
  // top-k/top-p truncation and logprobs, is the one plain decode samples.
  test::FlattenedRunner flat(runner_.get(), 6.0f);
  std::vector<SequenceOptions> seqs;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    SequenceOptions o = CopyPrompt(6, 4, 40, 500 + seed % 3);
    o.sampling.temperature = seed % 2 ? 0.8f : 1.3f;
    o.sampling.seed = seed;
    o.sampling.top_k = seed % 3 == 0 ? 40 : 0;
    o.sampling.top_p = seed % 4 == 0 ? 0.9f : 1.0f;
    o.sampling.repetition_penalty = seed % 5 == 0 ? 1.1f : 1.0f;
    o.sampling.logprobs = seed % 6 == 0 ? 3 : -1;
    o.ignore_eos = seed % 7 != 0;
    seqs.push_back(std::move(o));
  }
  Engine::Options opts;
  opts.speculation.max_step_rows = 64;  // every sequence drafts
  const auto [off, on] = RunBoth(seqs, opts, &flat);
  ExpectSameEvents(off, on);
  EXPECT_GT(Drafted(on.stats), 0);
  EXPECT_LT(Accepted(on.stats), Drafted(on.stats));
}

TEST_F(EngineSpeculationTest, Int8KvIsUnchanged) {
  std::vector<SequenceOptions> seqs = {CopyPrompt(10, 3, 50, 11), CopyPrompt(17, 2, 45, 12)};
  PositionBiasRunner biased(runner_.get());
  const auto [off, on] = RunBoth(seqs, {}, &biased, "int8");
  ExpectSameEvents(off, on);
  EXPECT_GT(Accepted(on.stats), 0);
  EXPECT_LT(Accepted(on.stats), Drafted(on.stats));
}

TEST_F(EngineSpeculationTest, SlidingWindowLayersAreUnchanged) {
  // A 40-token window on the first layer: drafts move the window by several
  // positions a step, and its out-of-window blocks go back as they do.
  model_->config.layer_window = {40, 0};
  runner_ = std::make_unique<CpuModelRunner>(model_->config, &model_->weights, 2);
  std::vector<SequenceOptions> seqs = {CopyPrompt(20, 4, 120, 21), CopyPrompt(13, 3, 100, 22)};
  PositionBiasRunner biased(runner_.get());
  const auto [off, on] = RunBoth(seqs, {}, &biased);
  ExpectSameEvents(off, on);
  EXPECT_GT(Accepted(on.stats), 0);
  EXPECT_LT(Accepted(on.stats), Drafted(on.stats));
}

TEST_F(EngineSpeculationTest, PrefixCacheServesAndKeepsOnlyKeptTokens) {
  // One engine per mode; the second request repeats the first's prompt and
  // output, so it reads blocks the first published while speculating.
  for (bool spec : {false, true}) {
    auto cache = KvCache::Create(KvLayout::ForModel(model_->config, kBlockSize), 96);
    ASSERT_TRUE(cache.ok());
    Engine::Options opts;
    opts.speculation.enabled = spec;
    Engine engine(tokenizer_.get(), runner_.get(), cache->get(), opts);
    SequenceOptions first = CopyPrompt(11, 3, 70, 31);
    std::vector<int32_t> out1;
    ASSERT_TRUE(engine.Add(first, [&](const TokenEvent& e) {
      if (e.token >= 0) out1.push_back(e.token);
    }).ok());
    while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
    SequenceOptions second = first;
    second.prompt.insert(second.prompt.end(), out1.begin(), out1.end() - 1);
    second.max_tokens = 20;
    std::vector<int32_t> out2;
    ASSERT_TRUE(engine.Add(second, [&](const TokenEvent& e) {
      if (e.token >= 0) out2.push_back(e.token);
    }).ok());
    EXPECT_GT(engine.prefix_stats().hit_tokens, 0);
    while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
    // The reference: the second request alone, on a fresh engine without
    // speculation or cache.
    const Outcome alone = Run({second}, {.prefix_cache = false});
    EXPECT_EQ(out2, TokensOf(alone.events[0])) << "speculation " << spec;
  }
}

TEST_F(EngineSpeculationTest, EndsExactlyAtMaxTokensAndEos) {
  // Drafts never run past max_tokens, and an end-of-generation token inside
  // a kept run ends the sequence there.
  std::vector<SequenceOptions> seqs;
  for (int max_tokens : {1, 2, 3, 7, 16, 17}) {
    seqs.push_back(CopyPrompt(8, 3, max_tokens, 40 + max_tokens));
  }
  for (int i = 0; i < 6; ++i) {
    SequenceOptions o = CopyPrompt(5 + i, 4, 90, 60 + i);
    o.ignore_eos = false;
    seqs.push_back(std::move(o));
  }
  const auto [off, on] = RunBoth(seqs);
  ExpectSameEvents(off, on);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(TokensOf(on.events[i]).size(), static_cast<size_t>(seqs[i].max_tokens));
  }
}

TEST_F(EngineSpeculationTest, BacksOffWhenTheBatchFillsTheStepRows) {
  std::vector<SequenceOptions> seqs;
  for (int i = 0; i < 8; ++i) seqs.push_back(CopyPrompt(6, 4, 30, 70 + i));
  Engine::Options opts;
  opts.speculation.enabled = true;
  opts.speculation.max_step_rows = 8;  // eight decode rows leave none for drafts
  PositionBiasRunner full_runner(runner_.get());
  const Outcome full = Run(seqs, opts, &full_runner);
  EXPECT_EQ(Drafted(full.stats), 0);
  EXPECT_EQ(full_runner.max_rows(), 8);
  opts.speculation.max_step_rows = 12;
  PositionBiasRunner some_runner(runner_.get());
  const Outcome some = Run(seqs, opts, &some_runner);
  EXPECT_GT(Drafted(some.stats), 0);
  // No step held more rows than allowed (fewer sequences, longer drafts).
  EXPECT_EQ(some_runner.max_rows(), 12);
  ExpectSameEvents(full, some);
}

TEST_F(EngineSpeculationTest, LaterRequestsDraftFromEarlierOutputs) {
  // A random prompt has nothing of its own to copy; the second request
  // with it drafts the first one's output from the suffix cache. The
  // position bias keeps the drafts from being all right.
  SequenceOptions o;
  o.prompt = RandomTokens(30, model_->config.n_vocab, 91);
  o.max_tokens = 40;
  o.ignore_eos = true;
  PositionBiasRunner biased(runner_.get());
  auto cache = KvCache::Create(KvLayout::ForModel(model_->config, kBlockSize), 96);
  ASSERT_TRUE(cache.ok());
  Engine::Options opts;
  opts.speculation.enabled = true;
  opts.speculation.min_ngram = 3;  // no 3-gram repeats in 30 random tokens
  opts.speculation.price_rows = false;
  opts.prefix_cache = false;
  Engine engine(tokenizer_.get(), &biased, cache->get(), opts);
  std::vector<int32_t> first, second;
  ASSERT_TRUE(engine.Add(o, [&](const TokenEvent& e) {
    if (e.token >= 0) first.push_back(e.token);
  }).ok());
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  const int suffix = static_cast<int>(DraftSource::kSuffixCache);
  EXPECT_EQ(engine.speculation_stats().source[suffix].drafted, 0);
  ASSERT_TRUE(engine.Add(o, [&](const TokenEvent& e) {
    if (e.token >= 0) second.push_back(e.token);
  }).ok());
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(second, first);
  EXPECT_GT(engine.speculation_stats().source[suffix].accepted, 0);
  const Outcome plain = Run({o}, {}, &biased);
  EXPECT_EQ(second, TokensOf(plain.events[0]));
}

TEST_F(EngineSpeculationTest, ACopyCarriesTheRenameItLearned) {
  // Three 40-token "functions" that use token 0 three times each; the
  // answer copies them with 0 renamed to 1 (copy_edits.h). Once the first
  // function has taught the rename, the drafts of the other two carry it
  // and are kept whole; a copy that kept drafting the old token would be
  // refused at each of its six uses there. (Prompt and answer fit the
  // test model's 256-token context.)
  constexpr int kFunctions = 3, kLength = 40;
  std::vector<int32_t> prompt, answer;
  for (int f = 0; f < kFunctions; ++f) {
    std::vector<int32_t> body = RandomTokens(kLength, model_->config.n_vocab - 2, 300 + f);
    for (int32_t& t : body) t += 2;  // neither 0 nor 1
    for (int at : {4, 16, 28}) body[at] = 0;
    prompt.insert(prompt.end(), body.begin(), body.end());
    for (int32_t& t : body) t = t == 0 ? 1 : t;
    answer.insert(answer.end(), body.begin(), body.end());
  }
  ScriptedAnswer scripted(runner_.get(), prompt, answer);
  const auto [off, on] = RunBoth({scripted.options}, {}, &scripted.runner);
  ExpectSameEvents(off, on);
  ASSERT_EQ(TokensOf(on.events[0]), answer);
  std::cout << "steps: " << on.steps << "; draft tokens kept: " << Accepted(on.stats) << " of "
            << Drafted(on.stats) << "\n";
  EXPECT_LE(Drafted(on.stats) - Accepted(on.stats), 2 * 8);
}

// Collects the messages logged while it lives.
class CapturedLog : public google::LogSink {
 public:
  CapturedLog() { google::AddLogSink(this); }
  ~CapturedLog() override { google::RemoveLogSink(this); }
  void send(google::LogSeverity, const char*, const char*, int, const google::LogMessageTime&,
            const char* message, size_t length) override {
    absl::MutexLock lock(&mu_);
    messages_.emplace_back(message, length);
  }
  int Count(absl::string_view part) {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(std::count_if(messages_.begin(), messages_.end(),
                                          [&](const std::string& m) {
                                            return absl::StrContains(m, part);
                                          }));
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> messages_ ABSL_GUARDED_BY(mu_);
};

TEST_F(EngineSpeculationTest, VerboseLogsShowEachDraftAndWhatRefusedIt) {
  // A copy of the prompt with one token changed: the draft that reaches it
  // is refused, and at --v=3 the log says what the model wrote instead.
  std::vector<int32_t> prompt = RandomTokens(60, model_->config.n_vocab - 2, 77);
  for (int32_t& t : prompt) t += 2;
  std::vector<int32_t> answer = prompt;
  answer[30] = 1;
  ScriptedAnswer scripted(runner_.get(), prompt, answer);
  const int32_t v = FLAGS_v;
  FLAGS_v = 3;
  CapturedLog log;
  Engine::Options opts;
  opts.speculation.enabled = true;
  const Outcome on = Run({scripted.options}, opts, &scripted.runner);
  FLAGS_v = v;
  ASSERT_EQ(TokensOf(on.events[0]), answer);
  EXPECT_EQ(log.Count(" drafted (prompt_lookup, anchor "), on.stats.steps);
  EXPECT_GE(log.Count("model wrote \"" + absl::CEscape(tokenizer_->Decode({1})) + "\""), 1);
}

TEST_F(EngineSpeculationTest, RowsArePricedByWhatTheyCost) {
  // Where a step is all rows, a draft position must be nearly sure to be
  // kept to pay for itself; where a row costs 1/100th of a step's fixed
  // part, any decent guess does. Same requests, same drafts offered: the
  // dear machine verifies fewer (the exact rule is speculation_test's; here
  // timing noise on a loaded machine may let a few more through).
  std::vector<SequenceOptions> seqs = {CopyPrompt(10, 3, 48, 95), CopyPrompt(12, 3, 48, 96)};
  Engine::Options opts;
  opts.speculation.enabled = true;
  PositionBiasRunner biased(runner_.get());
  TimedRunner dear(&biased, absl::ZeroDuration(), absl::Milliseconds(20));
  TimedRunner cheap(&biased, absl::Milliseconds(20), absl::Microseconds(200));
  const Outcome on_dear = Run(seqs, opts, &dear, "f16", /*price_rows=*/true);
  const Outcome on_cheap = Run(seqs, opts, &cheap, "f16", /*price_rows=*/true);
  ExpectSameEvents(on_dear, on_cheap);
  std::cout << "draft tokens verified: " << Drafted(on_dear.stats) << " where rows are dear, "
            << Drafted(on_cheap.stats) << " where they are cheap\n";
  EXPECT_GT(Drafted(on_cheap.stats), 0);
  EXPECT_LT(Drafted(on_dear.stats), Drafted(on_cheap.stats));
}

TEST_F(EngineSpeculationTest, RequestsChooseForThemselves) {
  SequenceOptions yes = CopyPrompt(9, 3, 40, 81);
  yes.sampling.speculative = true;
  SequenceOptions no = CopyPrompt(9, 3, 40, 81);
  no.sampling.speculative = false;
  Engine::Options off_by_default;
  EXPECT_GT(Drafted(Run({yes}, off_by_default).stats), 0);
  Engine::Options on_by_default;
  on_by_default.speculation.enabled = true;
  EXPECT_EQ(Drafted(Run({no}, on_by_default).stats), 0);
  EXPECT_GT(Drafted(Run({CopyPrompt(9, 3, 40, 81)}, on_by_default).stats), 0);
}

}  // namespace
}  // namespace pdserve
