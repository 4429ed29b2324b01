// End to end with real processes on loopback and the real model: the
// disaggregated path (router + prefill + decode, KV over TCP) must give the
// same greedy tokens as the colocated path and as the engine in-process,
// under concurrency; cancellation, deadlines, lost KV, full pools, bad input
// and mismatched workers must each end with a clear status and leave every
// KV pool back at idle.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/cpu/cpu_model_runner.h"
#include "common/engine/engine.h"
#include "common/model/model.h"
#include "common/model/random_model.h"
#include "common/request/token_logprobs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/cluster_test_util.h"
#include "tests/testing/engine_run.h"
#include "tests/testing/file_contents.h"
#include "tests/testing/temp_dir.h"

namespace pdserve {
namespace {

using testing::ChatRequest;
using testing::Generate;
using testing::GenerateOutcome;
using testing::PoolsIdle;
using testing::StartCluster;
using testing::TestTempDir;
using testing::TextRequest;

constexpr int kMaxTokens = 24;
const absl::Duration kTimeout = absl::Seconds(120);

std::vector<v1::GenerateRequest> Requests() {
  return {ChatRequest("What is the capital of France?", kMaxTokens),
          ChatRequest("Write a haiku about the sea.", kMaxTokens),
          TextRequest("Once upon a time, there was a little", kMaxTokens),
          TextRequest("def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
                      kMaxTokens)};
}

// Greedy tokens of each request from the engine in this process.
std::vector<std::vector<int32_t>> InProcessTokens(const Model& model,
                                                  const std::string& kv_dtype = "f16") {
  CpuModelRunner runner(model.config(), &model.weights(), 1);
  auto cache = KvCache::Create(KvLayout::ForModel(model.config(), 16, kv_dtype), 256);
  Engine engine(&model.tokenizer(), &runner, cache->get(), {});
  std::vector<std::vector<int32_t>> out;
  for (const v1::GenerateRequest& r : Requests()) {
    std::string text = r.text();
    if (r.has_chat()) {
      text = *model.chat_template().Render({{"user", r.chat().messages(0).content()}}, true);
    }
    SequenceOptions o;
    o.prompt = model.tokenizer().Encode(text, true);
    o.max_tokens = r.max_tokens();
    out.push_back(testing::RunAlone(engine, model.tokenizer(), std::move(o)));
  }
  return out;
}

// Every request twice, all at once.
std::vector<GenerateOutcome> RunConcurrently(const std::string& router) {
  const std::vector<v1::GenerateRequest> reqs = Requests();
  std::vector<GenerateOutcome> outs(2 * reqs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < outs.size(); ++i) {
    threads.emplace_back([&, i] {
      auto stub = testing::RouterStub(router);
      outs[i] = Generate(*stub, reqs[i % reqs.size()], kTimeout);
    });
  }
  for (std::thread& t : threads) t.join();
  return outs;
}

class ServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::RealModelPath().empty()) GTEST_SKIP() << "real model not found";
  }
};

// A process that refuses its model exits at once; the cluster's start (and
// so `pdserve up`) fails with the reason from its log instead of waiting
// for the router.
TEST(LocalClusterTest, ExitedProcessIsReportedWithItsLog) {
  LocalClusterOptions o;
  o.bin_dir = testing::BinDir();
  o.model = "/nonexistent/refused-model.gguf";
  o.log_dir = TestTempDir("refused");
  auto c = LocalCluster::Start(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  EXPECT_THAT(std::string(c.status().message()), ::testing::HasSubstr("exited"));
  EXPECT_THAT(std::string(c.status().message()), ::testing::HasSubstr("refused-model.gguf"));
}

// `pdserve up` supervision: a worker that dies is reaped, started again on
// its port after the back-off, and serves again; one that dies again soon
// waits twice as long.
TEST_F(ServingTest, SupervisedWorkerIsRestartedAndServesAgain) {
  LocalClusterOptions o;
  o.colocated = true;
  auto cluster = StartCluster(o, "supervised");
  ASSERT_NE(cluster, nullptr);
  auto stub = testing::RouterStub(cluster->router_address());
  const v1::GenerateRequest request = Requests()[0];
  const GenerateOutcome before = Generate(*stub, request, kTimeout);
  ASSERT_TRUE(before.status.ok()) << before.status.error_message();
  // Supervises until `name` was restarted; every event line, joined.
  auto restart = [&](const std::string& name) {
    std::string events;
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline && events.find("restarted " + name) == std::string::npos) {
      for (const std::string& e : cluster->Supervise(absl::Now())) events += e + "\n";
      absl::SleepFor(absl::Milliseconds(50));
    }
    return events;
  };
  cluster->Signal("decode-0", SIGKILL);
  const std::string first = restart("decode-0");
  EXPECT_THAT(first, ::testing::HasSubstr("decode-0 exited (signal 9)"));
  EXPECT_THAT(first, ::testing::HasSubstr("restarting decode-0 in 1s"));
  EXPECT_THAT(first, ::testing::HasSubstr("restarted decode-0"));
  cluster->Signal("decode-0", SIGKILL);
  EXPECT_THAT(restart("decode-0"), ::testing::HasSubstr("restarting decode-0 in 2s"));
  // The router re-admits it once its load reports resume.
  GenerateOutcome after = Generate(*stub, request, kTimeout);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (after.status.error_code() == grpc::StatusCode::UNAVAILABLE && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(200));
    after = Generate(*stub, request, kTimeout);
  }
  ASSERT_TRUE(after.status.ok()) << after.status.error_message();
  EXPECT_EQ(after.ids, before.ids);
}

TEST_F(ServingTest, DisaggregatedEqualsColocatedEqualsInProcess) {
  auto model = Model::Load(testing::RealModelPath());
  ASSERT_TRUE(model.ok());
  const auto want = InProcessTokens(**model);
  for (bool colocated : {false, true}) {
    LocalClusterOptions o;
    o.colocated = colocated;
    // Colocated prompts that arrive while others decode are prefilled in
    // 8-token chunks mixed into the decode steps: the same tokens.
    if (colocated) o.extra_decode_flags = {"--prefill_tokens_while_decoding=8"};
    auto cluster = StartCluster(o, colocated ? "colocated" : "disagg");
    ASSERT_NE(cluster, nullptr);
    auto outs = RunConcurrently(cluster->router_address());
    for (size_t i = 0; i < outs.size(); ++i) {
      ASSERT_TRUE(outs[i].status.ok()) << outs[i].status.error_message();
      EXPECT_EQ(outs[i].ids, want[i % want.size()])
          << "request " << i << " colocated=" << colocated;
      EXPECT_EQ(outs[i].finished.timings().prefill_mode(), colocated ? "local" : "remote");
      if (!colocated) EXPECT_GT(outs[i].finished.timings().kv_transfer_bytes(), 0u);
    }
    EXPECT_TRUE(PoolsIdle(*cluster, absl::Seconds(10)));
  }
}

// Requests given as token ids, with the greedy tokens the engine gives
// in-process for each (the oracle of the tests below).
struct TokenRequests {
  std::vector<v1::GenerateRequest> requests;
  std::vector<std::vector<int32_t>> want;
};

TokenRequests MakeTokenRequests(const Model& model,
                                const std::vector<std::vector<int32_t>>& prompts, int max_tokens) {
  TokenRequests out;
  out.want.resize(prompts.size());
  CpuModelRunner runner(model.config(), &model.weights(), 1);
  auto cache = KvCache::Create(KvLayout::ForModel(model.config(), 16), 512);
  EXPECT_TRUE(cache.ok());
  if (!cache.ok()) return out;
  Engine engine(&model.tokenizer(), &runner, cache->get(), {});
  for (size_t k = 0; k < prompts.size(); ++k) {
    SequenceOptions o;
    o.prompt = prompts[k];
    o.max_tokens = max_tokens;
    o.ignore_eos = true;
    v1::GenerateRequest r;
    for (int32_t id : o.prompt) r.mutable_tokens()->add_ids(id);
    r.set_max_tokens(max_tokens);
    r.set_ignore_eos(true);
    r.set_return_token_ids(true);
    out.requests.push_back(std::move(r));
    auto on_event = [&out, k](const TokenEvent& e) {
      if (e.token >= 0) out.want[k].push_back(e.token);
    };
    EXPECT_TRUE(engine.Add(o, on_event).ok());
  }
  while (engine.HasWork()) EXPECT_TRUE(engine.Step().ok());
  return out;
}

// `count` prompts of `tokens` English-text tokens, each shifted by one.
std::vector<std::vector<int32_t>> TextPrompts(const Model& model, int count, int tokens) {
  std::string text;
  std::vector<int32_t> base;
  while (base.size() < static_cast<size_t>(tokens + count)) {
    text += "The quick brown fox jumps over the lazy dog near the river bank. ";
    base = model.tokenizer().Encode(text, false);
  }
  std::vector<std::vector<int32_t>> prompts;
  for (int k = 0; k < count; ++k) prompts.emplace_back(base.begin() + k, base.begin() + k + tokens);
  return prompts;
}

std::vector<GenerateOutcome> GenerateAll(const LocalCluster& cluster,
                                         const std::vector<v1::GenerateRequest>& requests,
                                         absl::Duration timeout = kTimeout) {
  std::vector<GenerateOutcome> outs(requests.size());
  std::vector<std::thread> threads;
  for (size_t k = 0; k < requests.size(); ++k) {
    threads.emplace_back([&, k] {
      auto stub = testing::RouterStub(cluster.router_address());
      outs[k] = Generate(*stub, requests[k], timeout);
    });
  }
  for (std::thread& t : threads) t.join();
  return outs;
}

// This machine's prefill_compute_ms for `request`, alone on a cluster
// started with `o` (-1 on failure, reported). Tests whose timeouts must be
// shorter than a prefill set them from it: a fixed figure would stop
// testing anything on a fast enough machine. No deadline worth the name:
// under sanitizers on a slow core one long prompt takes minutes.
int64_t MeasuredPrefillMs(const LocalClusterOptions& o, const v1::GenerateRequest& request,
                          const std::string& tag) {
  auto calibration = StartCluster(o, tag + "-calibration");
  if (calibration == nullptr) return -1;
  const std::vector<GenerateOutcome> outs = GenerateAll(*calibration, {request}, absl::Minutes(10));
  EXPECT_TRUE(outs[0].status.ok()) << tag << ": " << outs[0].status.error_message();
  return outs[0].status.ok() ? outs[0].finished.timings().prefill_compute_ms() : -1;
}

// A prefill worker whose queue would not start a prompt before its attempt
// deadline refuses it at once (instead of computing it for nothing), and
// the decode worker prefills it: every request still ends with the tokens
// the engine gives in-process.
TEST_F(ServingTest, ASaturatedPrefillWorkerRefusesAndTheDecodeWorkerPrefills) {
  auto model = Model::Load(testing::RealModelPath());
  ASSERT_TRUE(model.ok());
  // Each prompt is more than one engine step (512 tokens): the k-th (from
  // 0) waits about (520 k - 512) / rate to start, i.e. about one prompt's
  // prefill time P from k = 2. The attempt deadline is P / 2, measured on
  // this machine, so k >= 2 are refused at any speed.
  // One prompt, sent 4 times with the prefix caches off (so each is
  // computed): the oracle runs it once. The decode worker prefills the
  // refused ones on one thread, which under ASan on a slow core takes
  // minutes: hence 4 requests, not more, and a wide deadline.
  const TokenRequests t = MakeTokenRequests(**model, TextPrompts(**model, 1, 520), 4);
  const std::vector<v1::GenerateRequest> burst(4, t.requests[0]);
  LocalClusterOptions o;
  o.extra_worker_flags = {"--prefix_cache=false"};
  o.extra_prefill_flags = {"--metrics_port=-1"};
  const int64_t prefill_ms = MeasuredPrefillMs(o, t.requests[0], "saturated-prefill");
  ASSERT_GT(prefill_ms, 0);
  o.extra_router_flags = {
      absl::StrCat("--prefill_attempt_timeout_ms=", std::max<int64_t>(prefill_ms / 2, 50))};
  auto cluster = StartCluster(o, "saturated-prefill");
  ASSERT_NE(cluster, nullptr);
  const std::vector<GenerateOutcome> outs = GenerateAll(*cluster, burst, absl::Seconds(400));
  for (size_t k = 0; k < outs.size(); ++k) {
    ASSERT_TRUE(outs[k].status.ok()) << k << ": " << outs[k].status.error_message();
    EXPECT_EQ(outs[k].ids, t.want[0]) << "request " << k;
  }
  EXPECT_GT(
      testing::ScrapeMetric(cluster->metrics_port("prefill-0"), "pdserve_prefill_refused_total"), 0)
      << "calibration: " << prefill_ms << " ms";
  EXPECT_GT(testing::ScrapeMetric(cluster->metrics_port("prefill-0"),
                                  "pdserve_prefill_tokens_per_second"),
            0);
  EXPECT_TRUE(PoolsIdle(*cluster, absl::Seconds(10)));
}

// A prompt whose prefill takes about twice the attempt timeout and the
// KV wait is still prefilled by the prefill worker, in one attempt: both
// waits run from the last sign of progress (a layer computed, a frame
// received), and with small chunks there is one every step (~1/41 of the
// prefill). Then the same prompt extended: the decode worker holds its prefix, the prefill
// worker (no prefix cache) recomputes it without sending it, and its
// PROGRESS frames keep the decode worker waiting.
TEST_F(ServingTest, ALongPrefillOutlastsItsTimeoutsWhileItProgresses) {
  auto model = Model::Load(testing::RealModelPath());
  ASSERT_TRUE(model.ok());
  // Long enough for many steps, short enough for a sanitizer build on a
  // slow core (the timeouts follow the machine's speed, not the length).
  std::vector<std::vector<int32_t>> prompts = TextPrompts(**model, 1, 670);
  prompts.push_back(prompts[0]);
  prompts[0].resize(650);
  const TokenRequests t = MakeTokenRequests(**model, prompts, 4);
  LocalClusterOptions o;
  o.extra_prefill_flags = {"--max_batch_tokens=16", "--prefix_cache=false"};  // 41 short steps
  // The timeouts: half of this machine's time for the prefill, so the
  // prefill outlasts them ~2x.
  const int64_t prefill_ms = MeasuredPrefillMs(o, t.requests[0], "long-prefill");
  ASSERT_GT(prefill_ms, 0);
  const int64_t kv_wait_ms = std::max<int64_t>(prefill_ms / 2, 100);
  o.extra_router_flags = {absl::StrCat("--kv_wait_ms=", kv_wait_ms),
                          absl::StrCat("--prefill_attempt_timeout_ms=", kv_wait_ms * 3 / 4),
                          "--prefill_retries=0"};
  auto cluster = StartCluster(o, "long-prefill");
  ASSERT_NE(cluster, nullptr);
  for (size_t k = 0; k < t.requests.size(); ++k) {
    const std::vector<GenerateOutcome> outs =
        GenerateAll(*cluster, {t.requests[k]}, absl::Minutes(10));
    ASSERT_TRUE(outs[0].status.ok()) << k << ": " << outs[0].status.error_message();
    EXPECT_EQ(outs[0].ids, t.want[k]) << k;
    const v1::Timings& timings = outs[0].finished.timings();
    EXPECT_EQ(timings.prefill_mode(), "remote") << k;
    // Longer than either wait: the whole-attempt timeouts of old would
    // have cut it off.
    EXPECT_GT(timings.prefill_compute_ms(), kv_wait_ms)
        << k << " (calibration: " << prefill_ms << " ms)";
    // The decode worker holds 40 full blocks (640 tokens): 2 blocks are sent.
    if (k == 1) EXPECT_EQ(timings.kv_transfer_bytes(), 2u * 16 * 23040) << "only the tail";
  }
  EXPECT_TRUE(PoolsIdle(*cluster, absl::Seconds(10)));
}

// A prompt the prefill worker's pool cannot hold is prefilled by the decode
// worker instead, although that decode worker's pool holds exactly one such
// request: the fall-back gives up the first reservation and waits for its
// blocks rather than finding its own reservation in the way.
TEST_F(ServingTest, FallBackToLocalPrefillReusesItsOwnBlocks) {
  auto model = Model::Load(testing::RealModelPath());
  ASSERT_TRUE(model.ok());
  std::vector<int32_t> prompt;
  for (int i = 0; i < 100; ++i) prompt.push_back(1000 + i);
  const TokenRequests t = MakeTokenRequests(**model, {prompt}, 28);  // 128 tokens = 8 blocks
  LocalClusterOptions o;
  o.kv_blocks = 8;
  o.extra_prefill_flags = {"--kv_blocks=4"};
  auto cluster = StartCluster(o, "fallback-own-blocks");
  ASSERT_NE(cluster, nullptr);
  const std::vector<GenerateOutcome> outs = GenerateAll(*cluster, t.requests);
  ASSERT_TRUE(outs[0].status.ok()) << outs[0].status.error_message();
  EXPECT_EQ(outs[0].finished.timings().prefill_mode(), "local");
  EXPECT_EQ(outs[0].ids, t.want[0]);
  EXPECT_TRUE(PoolsIdle(*cluster, absl::Seconds(10)));
}

// How long the stalled-router test stops the router: more than two stale
// periods of its watchdog (load reports every 100 ms).
constexpr absl::Duration kRouterStop = absl::Seconds(3);

// A greedy story of exactly `max_tokens`, one token per step: without
// speculation its rate stays steady, where drafts copied from a story that
// has started to repeat itself would make several tokens a step.
v1::GenerateRequest StoryRequest(int max_tokens) {
  v1::GenerateRequest r = TextRequest("Tell me a long story.", max_tokens);
  r.set_ignore_eos(true);
  r.mutable_sampling()->set_speculative(false);
  return r;
}

// A StoryRequest length whose decode on `cluster` lasts at least `d`, from
// the rate of a short one measured on the same cluster; 0 if that failed.
// Capped by SmolLM2's 8,192-token context.
int TokensOutlasting(LocalCluster& cluster, absl::Duration d) {
  constexpr int kProbeTokens = 128;
  const v1::GenerateRequest probe = StoryRequest(kProbeTokens);
  auto stub = testing::RouterStub(cluster.router_address());
  const GenerateOutcome out = Generate(*stub, probe, kTimeout);
  if (!out.status.ok()) return 0;
  const v1::Timings& t = out.finished.timings();
  const double decode_s = std::max(t.e2e_ms() - t.ttft_ms(), 1.0) / 1000;
  const double tokens_per_s = (kProbeTokens - 1) / decode_s;
  return static_cast<int>(std::clamp(tokens_per_s * absl::ToDoubleSeconds(d), 800.0, 8000.0));
}

// A router that was itself stopped (SIGSTOP, a paused VM) finds every
// stream and load report silent when it resumes; that is its own stall,
// not the workers': the streams carry on, nothing fails over.
TEST_F(ServingTest, AStalledRouterDoesNotAbandonHealthyWorkers) {
  LocalClusterOptions o;
  o.colocated = true;
  // Load reports every 100 ms: worker silence counts after 1.3 s.
  o.extra_router_flags = {"--load_poll_ms=100"};
  auto cluster = StartCluster(o, "stalled-router");
  ASSERT_NE(cluster, nullptr);
  // Long enough that the decode worker is still generating when the router
  // resumes, so the router's watchdog, not the stream's end, comes first:
  // sized from this machine's decode rate, since a fixed length that once
  // outlasted the stop does not once the kernels or the core are faster.
  const int max_tokens = TokensOutlasting(*cluster, 2 * kRouterStop);
  ASSERT_GT(max_tokens, 0);
  const v1::GenerateRequest request = StoryRequest(max_tokens);
  GenerateOutcome out;
  std::atomic<bool> streaming{false};
  std::thread client([&] {
    auto stub = testing::RouterStub(cluster->router_address());
    out = Generate(*stub, request, kTimeout, 0, &streaming);
  });
  // Stop the router only once it streams to the client (its watchdog is
  // armed then), however long the client took to get there.
  for (absl::Time until = absl::Now() + absl::Seconds(60); !streaming && absl::Now() < until;) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (!streaming) {
    client.join();  // a joinable thread must not outlive the test
    FAIL() << "no chunk within 60 s: " << out.status.error_message();
  }
  cluster->Signal("router", SIGSTOP);
  absl::SleepFor(kRouterStop);
  absl::StatusOr<v1::LoadReport> load = testing::DecodeLoad(cluster->addresses("decode").front());
  const bool still_decoding = load.ok() && load->running() > 0;
  cluster->Signal("router", SIGCONT);
  client.join();
  ASSERT_TRUE(still_decoding) << "the stream ended while the router was stopped";
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.finished.usage().completion_tokens(), max_tokens);
  // StartCluster logs to TestTempDir(tag).
  const std::string text = testing::FileContents(TestTempDir("stalled-router") + "/router.log");
  EXPECT_THAT(text, ::testing::HasSubstr("the router was stalled"));
  EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("went silent")));
  EXPECT_TRUE(PoolsIdle(*cluster, absl::Seconds(10)));
}

class DisaggClusterTest : public ServingTest {
 protected:
  void SetUp() override {
    ServingTest::SetUp();
    if (IsSkipped()) return;
    LocalClusterOptions o;
    o.kv_blocks = 64;  // 1024 tokens: small enough to exhaust in a test
    o.extra_router_flags = {"--kv_wait_ms=1500"};
    cluster_ = StartCluster(o, "faults");
    ASSERT_NE(cluster_, nullptr);
    stub_ = testing::RouterStub(cluster_->router_address());
  }
  // Several seconds of decoding on any core this runs on, so a 700 ms
  // deadline ends it, yet within the 64-block pools.
  static v1::GenerateRequest LongRequest() { return StoryRequest(960); }
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

TEST_F(DisaggClusterTest, CancellationFreesBlocksOnBothTiers) {
  GenerateOutcome o = Generate(*stub_, LongRequest(), kTimeout, 3);
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(PoolsIdle(*cluster_, absl::Seconds(10)));
}

TEST_F(DisaggClusterTest, DeadlineEndsRequestAndFreesBlocks) {
  GenerateOutcome o = Generate(*stub_, LongRequest(), absl::Milliseconds(700));
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(PoolsIdle(*cluster_, absl::Seconds(10)));
}

TEST_F(DisaggClusterTest, HungPrefillWorkerIsReplacedAndItsEpochReleased) {
  cluster_->Signal("prefill-0", SIGSTOP);  // prefill accepts nothing, sends nothing
  GenerateOutcome o = Generate(*stub_, TextRequest("Hello there", 8), absl::Seconds(20));
  cluster_->Signal("prefill-0", SIGCONT);
  // The Prefill attempt times out (3/4 of --kv_wait_ms); no other prefill
  // worker is left to retry on, so the router gives up the reservation and
  // the decode worker prefills locally.
  ASSERT_TRUE(o.status.ok()) << o.status.error_code() << " " << o.status.error_message();
  EXPECT_EQ(o.finished.timings().prefill_mode(), "local");
  EXPECT_TRUE(PoolsIdle(*cluster_, absl::Seconds(15)));
  EXPECT_TRUE(Generate(*stub_, TextRequest("Hello there", 4), kTimeout).status.ok());
}

TEST_F(DisaggClusterTest, ARequestNoDecodePoolCanHoldIsOutOfRange) {
  // 64 blocks hold 1024 tokens; ask for more than that: no retry can help,
  // so it is not RESOURCE_EXHAUSTED (which says "try again").
  GenerateOutcome o = Generate(*stub_, TextRequest("Count to a thousand.", 1100), kTimeout);
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::OUT_OF_RANGE) << o.status.error_message();
  EXPECT_TRUE(PoolsIdle(*cluster_, absl::Seconds(5)));
}

TEST_F(DisaggClusterTest, BadInputIsRefusedAndClusterKeepsServing) {
  struct Case {
    v1::GenerateRequest req;
    grpc::StatusCode code;
  };
  std::vector<Case> cases;
  cases.push_back({TextRequest("", 8), grpc::StatusCode::INVALID_ARGUMENT});
  cases.push_back({TextRequest("Hi", 9000), grpc::StatusCode::INVALID_ARGUMENT});
  v1::GenerateRequest bad_ids = TextRequest("x", 8);
  bad_ids.mutable_tokens()->add_ids(49152);
  cases.push_back({bad_ids, grpc::StatusCode::INVALID_ARGUMENT});
  v1::GenerateRequest nan = TextRequest("Hi", 8);
  nan.mutable_sampling()->set_temperature(std::nanf(""));
  cases.push_back({nan, grpc::StatusCode::INVALID_ARGUMENT});
  v1::GenerateRequest neg = TextRequest("Hi", 8);
  neg.mutable_sampling()->set_top_p(-1);
  cases.push_back({neg, grpc::StatusCode::INVALID_ARGUMENT});
  v1::GenerateRequest none;
  cases.push_back({none, grpc::StatusCode::INVALID_ARGUMENT});
  for (const Case& c : cases) {
    GenerateOutcome o = Generate(*stub_, c.req, kTimeout);
    EXPECT_TRUE(o.status.error_code() == c.code ||
                o.status.error_code() == grpc::StatusCode::OUT_OF_RANGE)
        << c.req.DebugString() << " -> " << o.status.error_code();
    EXPECT_FALSE(o.status.error_message().empty());
  }
  EXPECT_TRUE(Generate(*stub_, TextRequest("Hello", 4), kTimeout).status.ok());
  EXPECT_TRUE(PoolsIdle(*cluster_, absl::Seconds(5)));
}

// The prefill worker's own checks, for callers other than the router:
// each bad request gets INVALID_ARGUMENT naming what is wrong.
TEST_F(DisaggClusterTest, DirectPrefillWithABadTargetIsInvalidArgument) {
  auto stub = v1::PrefillWorker::NewStub(
      grpc::CreateChannel(cluster_->addresses("prefill")[0], grpc::InsecureChannelCredentials()));
  v1::PrefillRequest good;
  good.set_request_id("direct");
  for (int i = 0; i < 20; ++i) good.add_prompt_tokens(1000 + i);
  good.mutable_target()->set_kv_endpoint("127.0.0.1:1");
  struct Case {
    v1::PrefillRequest req;
    std::string want;
  };
  std::vector<Case> cases;
  cases.push_back({good, "kv_layout is missing"});
  cases.push_back({good, "prompt_tokens is empty"});
  cases.back().req.clear_prompt_tokens();
  cases.push_back({good, "kv_endpoint is empty"});
  cases.back().req.mutable_target()->clear_kv_endpoint();
  for (const Case& c : cases) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::PrefillResponse resp;
    const grpc::Status st = stub->Prefill(&ctx, c.req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.want;
    EXPECT_THAT(st.error_message(), ::testing::HasSubstr(c.want));
  }
  EXPECT_TRUE(Generate(*stub_, TextRequest("Hello", 4), kTimeout).status.ok());
  EXPECT_TRUE(PoolsIdle(*cluster_, absl::Seconds(5)));
}

// One 40-token prompt and the in-process engine's 8 greedy tokens for it.
TokenRequests OneShortRequest() {
  auto model = Model::Load(testing::RealModelPath());
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(1000 + i);
  return MakeTokenRequests(**model, {prompt}, 8);
}

// A cluster whose prefill tier never pairs with its decode tier: ready once
// the router, seeing both, has placed a probe locally for that reason.
std::unique_ptr<LocalCluster> StartUnpairedCluster(LocalClusterOptions o, const std::string& tag) {
  constexpr char kUnpaired[] =
      "pdserve_router_prefill_decisions_total{where=\"local\",reason=\"no_compatible_prefill_worker\"}";
  o.extra_router_flags.push_back("--metrics_port=-1");
  auto cluster = StartCluster(o, tag, /*await_remote_prefill=*/false);
  if (cluster == nullptr) return nullptr;
  auto stub = testing::RouterStub(cluster->router_address());
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (testing::ScrapeMetric(cluster->metrics_port("router"), kUnpaired) < 1) {
    if (absl::Now() > deadline) {
      ADD_FAILURE() << "cluster '" << tag << "': no placement for an unpaired prefill tier";
      return nullptr;
    }
    Generate(*stub, TextRequest("Hi", 1), kTimeout);
    absl::SleepFor(absl::Milliseconds(100));
  }
  return cluster;
}

// A prefill tier of another model (as while one tier is rolled over before
// the other) is never paired: the decode worker prefills requests itself,
// with the tokens of the in-process engine.
TEST_F(ServingTest, IncompatibleWorkersAreNeverPaired) {
  const TokenRequests t = OneShortRequest();
  ASSERT_EQ(t.requests.size(), 1u);
  const testing::ScopedTempDir dir("other-model");  // outlives the cluster below
  const std::string other = dir.File("other_model.gguf");
  RandomModelSpec spec;
  spec.n_vocab = 49152;  // tokenizer-compatible on ids, different fingerprint and shape
  ASSERT_TRUE(WriteRandomModelGguf(spec, other).ok());
  LocalClusterOptions o;
  o.prefill_model = other;
  auto cluster = StartUnpairedCluster(o, "mismatch");
  ASSERT_NE(cluster, nullptr);
  const std::vector<GenerateOutcome> outs = GenerateAll(*cluster, t.requests);
  ASSERT_TRUE(outs[0].status.ok()) << outs[0].status.error_message();
  EXPECT_EQ(outs[0].finished.timings().prefill_mode(), "local");
  EXPECT_EQ(outs[0].ids, t.want[0]);
  EXPECT_TRUE(PoolsIdle(*cluster, absl::Seconds(5)));
}

TEST_F(ServingTest, Int8KvDisaggregatedEqualsInProcess) {
  auto model = Model::Load(testing::RealModelPath());
  ASSERT_TRUE(model.ok());
  const auto want = InProcessTokens(**model, "int8");
  LocalClusterOptions o;
  o.extra_worker_flags = {"--kv_dtype=int8"};
  auto cluster = StartCluster(o, "int8");
  ASSERT_NE(cluster, nullptr);
  auto outs = RunConcurrently(cluster->router_address());
  for (size_t i = 0; i < outs.size(); ++i) {
    ASSERT_TRUE(outs[i].status.ok()) << outs[i].status.error_message();
    EXPECT_EQ(outs[i].ids, want[i % want.size()]) << "request " << i;
    EXPECT_EQ(outs[i].finished.timings().prefill_mode(), "remote");
    // Whole int8 blocks (6528 B per layer) of the uncached part of the prompt.
    EXPECT_EQ(outs[i].finished.timings().kv_transfer_bytes() % (30 * 6528), 0u);
  }
  EXPECT_TRUE(PoolsIdle(*cluster, absl::Seconds(10)));
}

// Logprobs asked for on the API come back with every token, the first one
// included (sampled by the prefill worker, it travels in the KV commit),
// and match the engine's in-process. Disaggregated only: colocated, the
// decode engine computes them all (engine_test covers that).
TEST_F(ServingTest, DisaggregatedLogprobsMatchInProcess) {
  auto loaded = Model::Load(testing::RealModelPath());
  ASSERT_TRUE(loaded.ok());
  const Model& model = **loaded;
  constexpr int kTop = 3;
  constexpr int kTokens = 8;
  const std::vector<int32_t> prompt = TextPrompts(model, 1, 24)[0];
  std::vector<TokenLogprobs> want;
  {
    CpuModelRunner runner(model.config(), &model.weights(), 1);
    auto cache = KvCache::Create(KvLayout::ForModel(model.config(), 16), 64);
    ASSERT_TRUE(cache.ok());
    Engine engine(&model.tokenizer(), &runner, cache->get(), {});
    SequenceOptions o;
    o.prompt = prompt;
    o.max_tokens = kTokens;
    o.ignore_eos = true;
    o.sampling.logprobs = kTop;
    auto on_event = [&want](const TokenEvent& e) {
      if (e.logprobs.has_value()) want.push_back(*e.logprobs);
    };
    ASSERT_TRUE(engine.Add(o, on_event).ok());
    while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  }
  ASSERT_EQ(want.size(), static_cast<size_t>(kTokens));

  v1::GenerateRequest request;
  for (int32_t id : prompt) request.mutable_tokens()->add_ids(id);
  request.set_max_tokens(kTokens);
  request.set_ignore_eos(true);
  request.mutable_sampling()->set_logprobs(kTop);  // brings token_ids without return_token_ids
  auto cluster = StartCluster(LocalClusterOptions{}, "logprobs");
  ASSERT_NE(cluster, nullptr);
  const GenerateOutcome out = GenerateAll(*cluster, {request})[0];
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.finished.timings().prefill_mode(), "remote");
  ASSERT_EQ(out.ids.size(), want.size());
  ASSERT_EQ(out.logprobs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(out.ids[i], want[i].token);
    EXPECT_EQ(out.logprobs[i].token(), want[i].token);
    EXPECT_NEAR(out.logprobs[i].logprob(), want[i].logprob, 1e-3);
    ASSERT_EQ(out.logprobs[i].top_size(), kTop);
    // Values, not ids: a near tie may order two candidates either way.
    for (int j = 0; j < kTop; ++j) {
      EXPECT_NEAR(out.logprobs[i].top(j).logprob(), want[i].top[static_cast<size_t>(j)].logprob,
                  1e-3)
          << j;
    }
  }
  EXPECT_TRUE(PoolsIdle(*cluster, absl::Seconds(10)));
}

// Tiers started with different --kv_dtype are never paired either: the
// request is served by local prefill, with the in-process engine's tokens.
TEST_F(ServingTest, KvDtypeMismatchIsNeverPaired) {
  const TokenRequests t = OneShortRequest();
  ASSERT_EQ(t.requests.size(), 1u);
  LocalClusterOptions o;
  o.extra_prefill_flags = {"--kv_dtype=int8"};
  auto cluster = StartUnpairedCluster(o, "dtype_mismatch");
  ASSERT_NE(cluster, nullptr);
  const std::vector<GenerateOutcome> outs = GenerateAll(*cluster, t.requests);
  ASSERT_TRUE(outs[0].status.ok()) << outs[0].status.error_message();
  EXPECT_EQ(outs[0].finished.timings().prefill_mode(), "local");
  EXPECT_EQ(outs[0].ids, t.want[0]);
  EXPECT_TRUE(PoolsIdle(*cluster, absl::Seconds(5)));
}

}  // namespace
}  // namespace pdserve
