// Prefix caching and delta KV transfer end to end, with real processes on
// loopback and the real model: a multi-turn chat (same system prompt,
// growing history) through router + 1 prefill + 1 decode worker. From the
// second turn on the decode worker reports a cached prefix, the prefill
// worker sends only the blocks after it (exactly that many bytes) and skips
// computing its own cached prefix; the outputs are the tokens of the same
// conversation on a cluster with --prefix_cache=false (and on one where only
// the prefill worker caches, so it must send blocks it did not compute),
// and every pool is back at idle afterwards (cached blocks count as free).
// With two decode workers, --policy_decode=prefix_aware keeps every turn of
// the conversation on the worker that holds its prefix (and hits its
// cache), while round_robin alternates between them.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/engine/kv_cache.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "tests/testing/cluster_test_util.h"

namespace pdserve {
namespace {

using testing::Generate;
using testing::GenerateOutcome;
using testing::PoolsIdle;
using testing::ScrapeMetric;
using testing::StartCluster;

const absl::Duration kTimeout = absl::Seconds(120);

constexpr char kSystem[] =
    "You are a concise travel assistant for a small agency. Answer in one or two short "
    "sentences, name concrete places, avoid lists, and never invent prices or opening "
    "hours. If a question is unclear, ask one short clarifying question instead.";

const std::vector<std::string>& Questions() {
  static const std::vector<std::string> q = {
      "I have three days in Lisbon. Where should I start?",
      "What should I eat there?",
      "Is a day trip to Sintra worth it?",
      "How do I get from the airport to the centre?",
  };
  return q;
}

struct Turn {
  GenerateOutcome out;
  int prompt_tokens = 0;
};

// The whole conversation on one router: each turn resends the system prompt
// and the history, with the model's own earlier answers.
std::vector<Turn> Converse(const std::string& router) {
  auto stub = testing::RouterStub(router);
  v1::GenerateRequest req;
  req.set_max_tokens(24);
  req.set_return_token_ids(true);
  v1::ChatMessage* system = req.mutable_chat()->add_messages();
  system->set_role("system");
  system->set_content(kSystem);
  std::vector<Turn> turns;
  for (const std::string& q : Questions()) {
    v1::ChatMessage* user = req.mutable_chat()->add_messages();
    user->set_role("user");
    user->set_content(q);
    Turn t;
    t.out = Generate(*stub, req, kTimeout);
    t.prompt_tokens = t.out.finished.usage().prompt_tokens();
    v1::ChatMessage* reply = req.mutable_chat()->add_messages();
    reply->set_role("assistant");
    reply->set_content(t.out.text);
    turns.push_back(std::move(t));
  }
  return turns;
}

// The workers' counters agree with what the requests reported. The cluster's
// start-up probe (StartCluster: one 1-token prompt, no cache hit) moved one
// block as well.
void ExpectMetricsMatch(const std::vector<Turn>& turns, int prefill_port, int decode_port,
                        uint64_t block_bytes, const std::string& name) {
  double decode_hits = 0, prefill_hits = 0, bytes = 0;
  for (const Turn& t : turns) {
    decode_hits += t.out.finished.usage().cached_prompt_tokens();
    prefill_hits += t.out.finished.timings().prefill_cached_tokens();
    bytes += static_cast<double>(t.out.finished.timings().kv_transfer_bytes());
  }
  EXPECT_EQ(ScrapeMetric(decode_port, "pdserve_decode_prefix_cache_hit_tokens_total"), decode_hits)
      << name;
  EXPECT_EQ(ScrapeMetric(prefill_port, "pdserve_prefill_prefix_cache_hit_tokens_total"),
            prefill_hits)
      << name;
  EXPECT_GT(ScrapeMetric(decode_port, "pdserve_decode_prefix_cache_lookup_tokens_total"),
            decode_hits)
      << name;
  const double received = ScrapeMetric(decode_port, "pdserve_decode_kv_received_bytes_total");
  EXPECT_EQ(received, bytes + static_cast<double>(block_bytes)) << name;
  EXPECT_EQ(ScrapeMetric(prefill_port, "pdserve_prefill_kv_sent_bytes_total"), received) << name;
}

// KV bytes of one block over all layers, from the router's model info.
uint64_t BytesPerBlock(const std::string& router) {
  auto stub = testing::RouterStub(router);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ModelInfo info;
  EXPECT_TRUE(stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).ok());
  const v1::KvLayout& l = info.kv_layout();
  return 2ull * l.block_size() * l.num_kv_heads() * l.head_dim() * 2 * l.num_layers();
}

class PrefixCacheServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::RealModelPath().empty()) GTEST_SKIP() << "real model not found";
  }
};

// Which workers run with the prefix cache.
struct Config {
  const char* name;
  bool prefill_cache;
  bool decode_cache;
};

TEST_F(PrefixCacheServingTest, MultiTurnChatTransfersOnlyNewBlocksAndKeepsOutputs) {
  constexpr int kBlock = 16;
  // Both caches (the default); neither (the reference); only the prefill
  // worker's, so it must send blocks it did not compute for this request.
  const std::vector<Config> configs = {{"prefix-on", true, true},
                                       {"prefix-off", false, false},
                                       {"prefix-prefill-only", true, false}};
  std::vector<std::vector<Turn>> runs;
  uint64_t block_bytes = 0;
  for (const Config& c : configs) {
    LocalClusterOptions o;
    o.kv_blocks = 256;
    o.extra_prefill_flags = {"--metrics_port=-1",
                             c.prefill_cache ? "--prefix_cache=true" : "--prefix_cache=false"};
    o.extra_decode_flags = {"--metrics_port=-1",
                            c.decode_cache ? "--prefix_cache=true" : "--prefix_cache=false"};
    auto cluster = StartCluster(o, c.name);
    ASSERT_NE(cluster, nullptr);
    block_bytes = BytesPerBlock(cluster->router_address());
    ASSERT_GT(block_bytes, 0u);
    runs.push_back(Converse(cluster->router_address()));
    ExpectMetricsMatch(runs.back(), cluster->metrics_port("prefill-0"),
                       cluster->metrics_port("decode-0"), block_bytes, c.name);
    for (const std::string& a : cluster->addresses("decode")) {
      auto l = testing::DecodeLoad(a);
      ASSERT_TRUE(l.ok());
      if (c.decode_cache) EXPECT_GT(l->kv_blocks_cached(), 0u) << "the conversation stays cached";
      if (!c.decode_cache) EXPECT_EQ(l->kv_blocks_cached(), 0u);
    }
    EXPECT_TRUE(PoolsIdle(*cluster, absl::Seconds(10))) << c.name;
  }
  const std::vector<Turn>& off = runs[1];
  for (size_t r = 0; r < runs.size(); ++r) {
    const Config& c = configs[r];
    ASSERT_EQ(runs[r].size(), off.size());
    for (size_t t = 0; t < off.size(); ++t) {
      const Turn& turn = runs[r][t];
      ASSERT_TRUE(turn.out.status.ok())
          << c.name << " turn " << t << ": " << turn.out.status.error_message();
      EXPECT_EQ(turn.out.ids, off[t].out.ids) << c.name << " turn " << t;
      EXPECT_EQ(turn.prompt_tokens, off[t].prompt_tokens) << c.name << " turn " << t;
      const v1::Finished& f = turn.out.finished;
      const uint64_t prompt_blocks = BlocksForTokens(turn.prompt_tokens, kBlock);
      const int cached = f.usage().cached_prompt_tokens();
      const uint32_t prefill_cached = f.timings().prefill_cached_tokens();
      // Delta transfer: exactly the blocks the decode worker did not hold.
      EXPECT_EQ(cached % kBlock, 0) << c.name << " turn " << t;
      EXPECT_LT(cached, turn.prompt_tokens) << c.name << " turn " << t;
      EXPECT_EQ(f.timings().kv_transfer_bytes(), (prompt_blocks - cached / kBlock) * block_bytes)
          << c.name << " turn " << t;
      LOG(INFO) << c.name << " turn " << t << ": prompt " << turn.prompt_tokens
                << " tokens, decode cached " << cached << ", prefill cached " << prefill_cached
                << ", kv bytes " << f.timings().kv_transfer_bytes() << " (uncached "
                << off[t].out.finished.timings().kv_transfer_bytes() << "), ttft "
                << f.timings().ttft_ms() << " ms (uncached "
                << off[t].out.finished.timings().ttft_ms() << " ms)";
      if (t == 0 || !c.decode_cache) EXPECT_EQ(cached, 0) << c.name << " turn " << t;
      if (t == 0 || !c.prefill_cache) EXPECT_EQ(prefill_cached, 0u) << c.name << " turn " << t;
      if (t == 0) continue;
      // The previous turn's prompt (and, on the decode worker, its answer)
      // is cached: at least the system prompt and the first question.
      const int at_least = off[0].prompt_tokens / kBlock * kBlock - kBlock;
      if (c.decode_cache) EXPECT_GE(cached, at_least) << c.name << " turn " << t;
      if (c.prefill_cache) EXPECT_GE(prefill_cached, at_least) << c.name << " turn " << t;
    }
  }
}

// Each decode worker's published prefix summary (LoadReport.cached_block_keys).
std::vector<std::vector<uint64_t>> DecodeSummaries(const LocalCluster& cluster) {
  std::vector<std::vector<uint64_t>> out;
  for (const std::string& a : cluster.addresses("decode")) {
    auto l = testing::DecodeLoad(a);
    EXPECT_TRUE(l.ok()) << a;
    out.emplace_back();
    if (l.ok()) out.back().assign(l->cached_block_keys().begin(), l->cached_block_keys().end());
  }
  return out;
}

// The decode worker that served a turn: the one whose summary gained keys
// (its prompt's blocks), or -1 when none or several did.
int ServingWorker(const std::vector<std::vector<uint64_t>>& before,
                  const std::vector<std::vector<uint64_t>>& after) {
  int serving = -1;
  for (size_t w = 0; w < after.size(); ++w) {
    const bool gained = std::any_of(after[w].begin(), after[w].end(), [&](uint64_t k) {
      return !std::binary_search(before[w].begin(), before[w].end(), k);
    });
    if (!gained) continue;
    if (serving != -1) return -1;
    serving = static_cast<int>(w);
  }
  return serving;
}

struct RoutedTurn {
  int worker = -1;
  int cached = 0;  // Finished.usage.cached_prompt_tokens
};

// The conversation of Converse(), one turn at a time, noting which decode
// worker served each turn.
std::vector<RoutedTurn> ConverseAndTrack(const LocalCluster& cluster, int load_poll_ms) {
  auto stub = testing::RouterStub(cluster.router_address());
  v1::GenerateRequest req;
  req.set_max_tokens(8);
  v1::ChatMessage* system = req.mutable_chat()->add_messages();
  system->set_role("system");
  system->set_content(kSystem);
  std::vector<RoutedTurn> turns;
  for (const std::string& q : Questions()) {
    v1::ChatMessage* user = req.mutable_chat()->add_messages();
    user->set_role("user");
    user->set_content(q);
    const auto before = DecodeSummaries(cluster);
    GenerateOutcome out = Generate(*stub, req, kTimeout);
    EXPECT_TRUE(out.status.ok()) << out.status.error_message();
    RoutedTurn t;
    t.worker = ServingWorker(before, DecodeSummaries(cluster));
    t.cached = out.finished.usage().cached_prompt_tokens();
    turns.push_back(t);
    v1::ChatMessage* reply = req.mutable_chat()->add_messages();
    reply->set_role("assistant");
    reply->set_content(out.text);
    // The worker published its new keys already (GetLoad above); the
    // router sees them with its next load report. Routing does not depend
    // on this wait being long enough, only the test's premise that the
    // router knows the previous turn does, so it is generous.
    absl::SleepFor(absl::Milliseconds(10 * load_poll_ms));
  }
  return turns;
}

TEST_F(PrefixCacheServingTest, PrefixAwareRoutingKeepsAConversationOnItsDecodeWorker) {
  constexpr int kLoadPollMs = 50;
  for (const char* policy : {"prefix_aware", "round_robin"}) {
    SCOPED_TRACE(policy);
    LocalClusterOptions o;
    o.decode = 2;
    o.kv_blocks = 256;
    o.extra_router_flags = {absl::StrCat("--policy_decode=", policy),
                            absl::StrCat("--load_poll_ms=", kLoadPollMs), "--metrics_port=-1"};
    auto cluster = StartCluster(o, absl::StrCat("routing-", policy));
    ASSERT_NE(cluster, nullptr);
    // The start-up probe needs one live decode worker; the test needs both.
    for (const std::string& a : cluster->addresses("decode")) {
      const absl::Time deadline = absl::Now() + absl::Seconds(30);
      while (!testing::DecodeLoad(a).ok() && absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(50));
      }
    }
    absl::SleepFor(absl::Milliseconds(10 * kLoadPollMs));
    const std::vector<RoutedTurn> turns = ConverseAndTrack(*cluster, kLoadPollMs);
    ASSERT_EQ(turns.size(), Questions().size());
    for (size_t t = 0; t < turns.size(); ++t) {
      SCOPED_TRACE(absl::StrCat("turn ", t));
      ASSERT_NE(turns[t].worker, -1) << "exactly one decode worker must have served it";
      if (t == 0) continue;
      if (std::string(policy) == "prefix_aware") {
        EXPECT_EQ(turns[t].worker, turns[0].worker);
        EXPECT_GT(turns[t].cached, 0) << "the turn hits its worker's prefix cache";
      } else {
        EXPECT_NE(turns[t].worker, turns[t - 1].worker);
      }
    }
    // The router counted every placement (the start-up probe too) under
    // the policy, each prefilled remotely.
    const double placed = static_cast<double>(turns.size());
    EXPECT_GE(ScrapeMetric(cluster->metrics_port("router"),
                           absl::StrCat("pdserve_router_routing_decisions_total{tier=\"decode\","
                                        "policy=\"",
                                        policy, "\"}")),
              placed);
    EXPECT_GE(ScrapeMetric(cluster->metrics_port("router"),
                           "pdserve_router_prefill_decisions_total{where=\"remote\","
                           "reason=\"prefill_worker_available\"}"),
              placed);
    EXPECT_TRUE(PoolsIdle(*cluster, absl::Seconds(10))) << policy;
  }
}

}  // namespace
}  // namespace pdserve
