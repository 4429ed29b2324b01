// Chaos: 1 router, 2 prefill and 2 decode workers (real binaries, real
// model) under a bounded concurrent load of greedy chat requests, while
// workers are SIGKILLed and restarted at random (seeded) moments. Every
// client stream must end either with the complete fault-free greedy answer
// or with a clear error status well within its deadline; none may hang;
// afterwards every worker's KV pool is back at idle (GetLoad).
//
// Prints one "chaos summary:" line with the numbers docs/RELIABILITY.md
// reports. PDSERVE_CHAOS_SEED / PDSERVE_CHAOS_REQUESTS override the seed and
// the number of requests, PDSERVE_CHAOS_ROUTER_FLAGS adds router flags.
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/cpu/cpu_model_runner.h"
#include "common/engine/engine.h"
#include "common/model/model.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "tests/testing/cluster_test_util.h"

namespace pdserve {
namespace {

using testing::ChatRequest;
using testing::GenerateOutcome;

constexpr int kMaxTokens = 24;
constexpr int kClients = 4;
// Far beyond what any request needs; reaching it means the request hung.
const absl::Duration kClientDeadline = absl::Seconds(90);
const absl::Duration kClientBackoff = absl::Milliseconds(500);

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

std::vector<std::string> Prompts() {
  return {"What is the capital of France?",
          "Write a haiku about the sea.",
          "Give me three tips for learning to cook.",
          "Explain what a hash table is in one paragraph.",
          "Why is the sky blue?",
          "Translate 'good morning' into Spanish and German.",
          "List the planets of the solar system.",
          "What should I pack for a weekend hike?"};
}

// The fault-free greedy answer of each prompt, from the engine in-process.
std::vector<std::vector<int32_t>> Reference(const Model& model) {
  CpuModelRunner runner(model.config(), &model.weights(), 1);
  auto cache = KvCache::Create(KvLayout::ForModel(model.config(), 16), 256);
  Engine engine(&model.tokenizer(), &runner, cache->get(), {});
  std::vector<std::vector<int32_t>> out;
  for (const std::string& p : Prompts()) {
    SequenceOptions o;
    o.prompt = model.tokenizer().Encode(*model.chat_template().Render({{"user", p}}, true), true);
    o.max_tokens = kMaxTokens;
    std::vector<int32_t> ids;
    EXPECT_TRUE(engine
                    .Add(o,
                         [&](const TokenEvent& e) {
                           if (e.token >= 0 && !model.tokenizer().IsEog(e.token))
                             ids.push_back(e.token);
                         })
                    .ok());
    while (engine.HasWork()) EXPECT_TRUE(engine.Step().ok());
    out.push_back(ids);
  }
  return out;
}

struct Tally {
  absl::Mutex mu;
  int sent = 0;
  int completed = 0;
  int wrong = 0;
  int hangs = 0;
  std::map<std::string, int> errors;
  std::vector<std::string> problems;
};

// Kills a random worker at a random moment and restarts it a moment
// later, until `stop`; one worker is down at a time. Runs on the test's
// main thread: the workers die with the thread that started them
// (PR_SET_PDEATHSIG), so they must not be started from a short-lived one.
int InjectFaults(LocalCluster& cluster, uint32_t seed, const std::atomic<bool>& stop) {
  const std::vector<std::string> workers = {"prefill-0", "prefill-1", "decode-0", "decode-1"};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> up_ms(300, 1200), down_ms(200, 1000);
  std::uniform_int_distribution<size_t> pick(0, workers.size() - 1);
  int faults = 0;
  auto sleep_unless_stopped = [&](int ms) {
    for (int t = 0; t < ms && !stop.load(); t += 20) absl::SleepFor(absl::Milliseconds(20));
  };
  while (!stop.load()) {
    sleep_unless_stopped(up_ms(rng));
    if (stop.load()) break;
    const std::string& victim = workers[pick(rng)];
    cluster.Kill(victim);
    ++faults;
    LOG(INFO) << "chaos: SIGKILL " << victim;
    sleep_unless_stopped(down_ms(rng));
    EXPECT_TRUE(cluster.Restart(victim).ok());
    LOG(INFO) << "chaos: restarted " << victim;
  }
  return faults;
}

void RunClient(const std::string& router, const std::vector<std::vector<int32_t>>& want, int total,
               std::atomic<int>& next, Tally& tally) {
  auto stub = testing::RouterStub(router);
  const std::vector<std::string> prompts = Prompts();
  // Like a real client, back off after an error instead of burning the rest
  // of the load within a moment while no worker of a tier is live.
  bool backoff = false;
  for (int i = next.fetch_add(1); i < total; i = next.fetch_add(1)) {
    if (backoff) absl::SleepFor(kClientBackoff);
    backoff = false;
    const size_t k = static_cast<size_t>(i) % prompts.size();
    const absl::Time start = absl::Now();
    GenerateOutcome o =
        testing::Generate(*stub, ChatRequest(prompts[k], kMaxTokens), kClientDeadline);
    const absl::Duration took = absl::Now() - start;
    absl::MutexLock lock(&tally.mu);
    ++tally.sent;
    backoff = !o.status.ok();
    if (took >= kClientDeadline - absl::Seconds(1)) {
      ++tally.hangs;
      tally.problems.push_back(
          absl::StrCat("request ", i, " hung for ", absl::FormatDuration(took)));
    } else if (o.status.ok() && o.ids == want[k]) {
      ++tally.completed;
    } else if (o.status.ok()) {
      ++tally.wrong;
      tally.problems.push_back(absl::StrCat("request ", i, " (prompt ", k,
                                            ") completed with a different answer: ", o.text));
    } else {
      ++tally
            .errors[absl::StatusCodeToString(static_cast<absl::StatusCode>(o.status.error_code()))];
      if (o.status.error_message().empty()) {
        tally.problems.push_back(absl::StrCat("request ", i, " failed without a message"));
      }
      LOG(INFO) << "request " << i << ": " << o.status.error_code() << " "
                << o.status.error_message();
    }
  }
}

// KV blocks still in use on every worker once the pools had time to drain.
int64_t BlocksInUse(const LocalCluster& cluster) {
  int64_t used = 0;
  for (const std::string& a : cluster.addresses("decode")) {
    auto l = testing::DecodeLoad(a);
    used += l.ok() ? l->kv_blocks_total() - l->kv_blocks_free() : 1 << 20;
  }
  for (const std::string& a : cluster.addresses("prefill")) {
    auto l = testing::PrefillLoad(a);
    used += l.ok() ? l->kv_blocks_total() - l->kv_blocks_free() : 1 << 20;
  }
  return used;
}

TEST(ChaosTest, KilledWorkersNeverCorruptHangOrLeak) {
  if (testing::RealModelPath().empty()) GTEST_SKIP() << "real model not found";
  auto model = Model::Load(testing::RealModelPath());
  ASSERT_TRUE(model.ok());
  const auto want = Reference(**model);
  const uint32_t seed = static_cast<uint32_t>(EnvInt("PDSERVE_CHAOS_SEED", 7));
  const int total = EnvInt("PDSERVE_CHAOS_REQUESTS", 96);

  LocalClusterOptions o;
  o.prefill = 2;
  o.decode = 2;
  o.kv_blocks = 256;
  o.extra_router_flags = {"--load_poll_ms=100", "--kv_wait_ms=4000",
                          "--prefill_attempt_timeout_ms=3000", "--breaker_cooldown_ms=1000"};
  // E.g. "--decode_failovers=0,--prefill_retries=0": the same chaos with
  // recovery turned off (docs/RELIABILITY.md compares both).
  if (const char* extra = std::getenv("PDSERVE_CHAOS_ROUTER_FLAGS"); extra != nullptr) {
    for (absl::string_view f : absl::StrSplit(extra, ',', absl::SkipEmpty())) {
      o.extra_router_flags.emplace_back(f);
    }
  }
  auto cluster = testing::StartCluster(o, "chaos");
  ASSERT_NE(cluster, nullptr);

  Tally tally;
  std::atomic<bool> stop{false};
  std::atomic<int> next{0}, running{kClients};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      RunClient(cluster->router_address(), want, total, next, tally);
      if (running.fetch_sub(1) == 1) stop.store(true);
    });
  }
  const int faults = InjectFaults(*cluster, seed, stop);
  for (std::thread& t : clients) t.join();

  // Every worker is running again; their pools must drain to idle.
  const bool idle = testing::PoolsIdle(*cluster, absl::Seconds(30));
  const int64_t leaked = BlocksInUse(*cluster);
  std::vector<std::string> errors;
  for (const auto& [code, n] : tally.errors) errors.push_back(absl::StrCat(code, "=", n));
  const std::string summary =
      absl::StrCat("chaos summary: seed=", seed, " faults=", faults, " requests=", tally.sent,
                   " completed=", tally.completed, " errors={", absl::StrJoin(errors, ", "),
                   "} wrong=", tally.wrong, " leaked_blocks=", leaked, " hangs=", tally.hangs);
  std::cout << summary << std::endl;
  LOG(INFO) << summary;
  for (const std::string& p : tally.problems) ADD_FAILURE() << p;
  EXPECT_EQ(tally.sent, total);
  EXPECT_EQ(tally.wrong, 0);
  EXPECT_EQ(tally.hangs, 0);
  EXPECT_TRUE(idle);
  EXPECT_EQ(leaked, 0);
  EXPECT_GT(faults, 0);
  EXPECT_GT(tally.completed, 0);
}

}  // namespace
}  // namespace pdserve
