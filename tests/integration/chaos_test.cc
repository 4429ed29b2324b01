// Chaos: 1 router, 2 prefill and 2 decode workers (real binaries, real
// model, speculation on as by default) under a bounded concurrent load,
// while workers fail at random (seeded) moments in random (seeded) ways:
//   kill   SIGKILL a worker, restart it a moment later;
//   term   SIGTERM a worker (a decode worker drains by migrating its
//          streams with their KV, rebalancing on), restart it once gone;
//   stop   SIGSTOP a prefill worker (a stall), SIGCONT it a moment later.
// The load mixes greedy chat, seeded sampled chat and JSON-constrained
// chat over gRPC, and streamed chat over the OpenAI HTTP API, some of whose
// clients hang up after the first event. Every stream that completes must
// carry exactly the tokens (text, over HTTP) the in-process engine gives
// the same request without faults; every other one must end with a clear
// error well within its deadline; none may hang; afterwards every worker's
// KV pool is back at idle (GetLoad). Meanwhile each process's RSS, open
// descriptors and threads are sampled (printed; scripts/soak.sh reads
// their slope over a long run).
//
// Prints one "chaos summary:" line with the numbers docs/RELIABILITY.md
// reports. Knobs (environment): PDSERVE_CHAOS_SEED, PDSERVE_CHAOS_REQUESTS,
// PDSERVE_CHAOS_FAULTS (e.g. "kill" or "kill,term,stop"), PDSERVE_CHAOS_KV_DTYPE
// (f16, int8), PDSERVE_CHAOS_ROUTER_FLAGS (comma-separated router flags).
#include <dirent.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
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
#include "common/grammar/tokenizer_vocab.h"
#include "common/model/model.h"
#include "common/request/sampling_proto.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cluster_test_util.h"
#include "tests/testing/http_test_client.h"

namespace pdserve {
namespace {

using testing::ChatRequest;
using testing::GenerateOutcome;
using Json = nlohmann::json;

constexpr int kMaxTokens = 24;
constexpr int kClients = 4;
// Far beyond what any request needs; reaching it means the request hung.
const absl::Duration kClientDeadline = absl::Seconds(90);
const absl::Duration kClientBackoff = absl::Milliseconds(500);
constexpr float kTemperature = 0.8f;
constexpr uint64_t kSeed = 1234;
constexpr char kJsonRegex[] = R"(\{"answer": "[a-zA-Z ,.]{1,60}"\})";

// How a request is sent (request i is kind i % kNumKinds).
enum class Kind { kGreedy, kSampled, kConstrained, kHttpStream, kHttpDrop };
constexpr int kNumKinds = 5;
const char* KindName(Kind k) {
  switch (k) {
    case Kind::kGreedy:
      return "grpc_greedy";
    case Kind::kSampled:
      return "grpc_sampled";
    case Kind::kConstrained:
      return "grpc_constrained";
    case Kind::kHttpStream:
      return "http_stream";
    case Kind::kHttpDrop:
      return "http_drop";
  }
  return "?";
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

std::string EnvString(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
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

// The sampling a gRPC request of `kind` asks for.
SamplingParams SamplingOf(Kind kind) {
  SamplingParams s;
  if (kind == Kind::kSampled) {
    s.temperature = kTemperature;
    s.seed = kSeed;
  }
  if (kind == Kind::kConstrained) s.constraint = GrammarConstraint::Regex(kJsonRegex);
  return s;
}

// The fault-free answer of each (prompt, kind), from the engine in-process.
// HTTP streams are greedy: their text is the greedy answer's.
using Reference = std::map<std::pair<size_t, Kind>, std::vector<int32_t>>;
Reference MakeReference(const Model& model, const std::string& kv_dtype) {
  CpuModelRunner runner(model.config(), &model.weights(), 1);
  // The workers' KV element type: int8 KV has its own (exact) numerics.
  auto cache = KvCache::Create(KvLayout::ForModel(model.config(), 16, kv_dtype), 256);
  auto grammars = NewGrammarCompiler(model.tokenizer(), model.config().n_vocab);
  EXPECT_TRUE(grammars.ok()) << grammars.status();
  Engine engine(&model.tokenizer(), &runner, cache->get(), {});
  Reference out;
  const std::vector<std::string> prompts = Prompts();
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (Kind kind : {Kind::kGreedy, Kind::kSampled, Kind::kConstrained}) {
      SequenceOptions o;
      o.prompt = model.tokenizer().Encode(
          *model.chat_template().Render({{"user", prompts[p]}}, true), true);
      o.max_tokens = kMaxTokens;
      o.sampling = SamplingOf(kind);
      if (o.sampling.constraint.has_value())
        o.grammar = *(*grammars)->Compile(*o.sampling.constraint);
      std::vector<int32_t>& ids = out[{p, kind}];
      EXPECT_TRUE(engine
                      .Add(o,
                           [&](const TokenEvent& e) {
                             if (e.token >= 0 && !model.tokenizer().IsEog(e.token))
                               ids.push_back(e.token);
                           })
                      .ok());
      while (engine.HasWork()) EXPECT_TRUE(engine.Step().ok());
    }
  }
  return out;
}

struct Tally {
  absl::Mutex mu;
  int sent = 0;
  int completed = 0;
  int dropped = 0;  // clients that hung up on purpose
  int wrong = 0;
  int hangs = 0;
  std::map<std::string, int> by_kind;  // completed, by kind
  std::map<std::string, int> errors;
  std::map<std::string, int> faults;
  std::vector<std::string> problems;
};

// ---------------------------------------------------------------------------
// Faults

struct Fault {
  std::string kind;    // kill, term, stop
  std::string victim;  // prefill-N, decode-N
};

// Injects faults at random moments until `stop`; one worker is down at a
// time. Runs on the test's main thread: the workers die with the thread
// that started them (PR_SET_PDEATHSIG), so they must not be started from a
// short-lived one.
void InjectFaults(LocalCluster& cluster, uint32_t seed, const std::vector<std::string>& kinds,
                  const std::atomic<bool>& stop, Tally& tally) {
  const std::vector<std::string> workers = {"prefill-0", "prefill-1", "decode-0", "decode-1"};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> up_ms(300, 1200), down_ms(200, 1000);
  auto sleep_unless_stopped = [&](int ms) {
    for (int t = 0; t < ms && !stop.load(); t += 20) absl::SleepFor(absl::Milliseconds(20));
  };
  while (!stop.load()) {
    sleep_unless_stopped(up_ms(rng));
    if (stop.load()) break;
    Fault f{kinds[std::uniform_int_distribution<size_t>(0, kinds.size() - 1)(rng)], ""};
    // A stall is a prefill worker's (a stopped decode worker only looks
    // like a slow one until the watchdog, which the kill covers).
    const size_t last = f.kind == "stop" ? 1 : workers.size() - 1;
    f.victim = workers[std::uniform_int_distribution<size_t>(0, last)(rng)];
    LOG(INFO) << "chaos: " << f.kind << " " << f.victim;
    {
      absl::MutexLock lock(&tally.mu);
      ++tally.faults[f.kind];
    }
    if (f.kind == "stop") {
      cluster.Signal(f.victim, SIGSTOP);
      sleep_unless_stopped(down_ms(rng));
      cluster.Signal(f.victim, SIGCONT);
      continue;
    }
    if (f.kind == "term") {
      // Drains (a decode worker migrates its streams); gone well within
      // the drain window, or killed at the restart if still draining.
      cluster.Signal(f.victim, SIGTERM);
      sleep_unless_stopped(down_ms(rng) + 1500);
    } else {
      cluster.Kill(f.victim);
      sleep_unless_stopped(down_ms(rng));
    }
    cluster.Kill(f.victim);  // reaps it; SIGKILLs a drain still running
    EXPECT_TRUE(cluster.Restart(f.victim).ok());
    LOG(INFO) << "chaos: restarted " << f.victim;
  }
  // Nothing stays stopped past the load.
  cluster.Signal("prefill-0", SIGCONT);
  cluster.Signal("prefill-1", SIGCONT);
}

// ---------------------------------------------------------------------------
// Clients

struct Outcome {
  bool ok = false;
  bool dropped = false;
  std::string error_code;  // when not ok
  std::string error_message;
  bool matches = false;
  std::string got;  // what came, for the report
};

Outcome SendGrpc(v1::Generation::Stub& stub, const std::string& prompt, Kind kind,
                 const std::vector<int32_t>& want) {
  v1::GenerateRequest r = ChatRequest(prompt, kMaxTokens);
  *r.mutable_sampling() = ToProto(SamplingOf(kind));
  GenerateOutcome o = testing::Generate(stub, r, kClientDeadline);
  Outcome out;
  out.ok = o.status.ok();
  out.error_code = absl::StatusCodeToString(static_cast<absl::StatusCode>(o.status.error_code()));
  out.error_message = o.status.error_message();
  out.matches = o.ids == want;
  out.got = o.text;
  return out;
}

// A streamed chat completion over HTTP; `drop`: hang up after the first
// event instead of reading to the end.
Outcome SendHttp(const std::string& address, const std::string& prompt, bool drop,
                 const std::string& want_text) {
  Outcome out;
  const std::string body = Json{
      {"messages", {{{"role", "user"}, {"content", prompt}}}},
      {"max_tokens", kMaxTokens},
      {"temperature", 0},
      {"stream", true}}.dump();
  if (drop) {
    namespace asio = boost::asio;
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    boost::system::error_code ec;
    socket.connect(testing::internal::Endpoint(address), ec);
    const std::string request = absl::StrCat(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: ", address,
        "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
    if (!ec) asio::write(socket, asio::buffer(request), ec);
    std::string got;
    char buf[4096];
    while (!ec && got.find("data: ") == std::string::npos) {
      got.append(buf, socket.read_some(asio::buffer(buf), ec));
    }
    out.dropped = true;
    return out;  // the socket closes here, mid-stream
  }
  const testing::HttpResult r = testing::HttpCall(address, "POST", "/v1/chat/completions", body);
  std::string text;
  std::string error;
  for (const std::string& e : r.Events()) {
    if (e == "[DONE]") continue;
    const Json j = Json::parse(e, nullptr, false);
    if (j.contains("error")) error = j["error"].value("message", "error event");
    if (!j.contains("choices") || j["choices"].empty()) continue;
    const Json& delta = j["choices"][0]["delta"];
    if (delta.contains("content") && delta["content"].is_string()) text += delta["content"];
  }
  out.ok = r.status == 200 && error.empty() && r.body.find("data: [DONE]") != std::string::npos;
  out.error_code = r.status == 200 ? "HTTP_STREAM_ERROR" : absl::StrCat("HTTP_", r.status);
  out.error_message = r.status == 200 ? error : r.body;
  out.matches = text == want_text;
  out.got = text;
  return out;
}

void RunClient(const LocalCluster& cluster, const Model& model, const Reference& want, int total,
               std::atomic<int>& next, Tally& tally) {
  auto stub = testing::RouterStub(cluster.router_address());
  const std::vector<std::string> prompts = Prompts();
  // Like a real client, back off after an error instead of burning the rest
  // of the load within a moment while no worker of a tier is live.
  bool backoff = false;
  for (int i = next.fetch_add(1); i < total; i = next.fetch_add(1)) {
    if (backoff) absl::SleepFor(kClientBackoff);
    const size_t p = static_cast<size_t>(i / kNumKinds) % prompts.size();
    const Kind kind = static_cast<Kind>(i % kNumKinds);
    const bool http = kind == Kind::kHttpStream || kind == Kind::kHttpDrop;
    const std::vector<int32_t>& ids = want.at({p, http ? Kind::kGreedy : kind});
    const absl::Time start = absl::Now();
    const Outcome o = http ? SendHttp(cluster.http_address(), prompts[p], kind == Kind::kHttpDrop,
                                      model.tokenizer().Decode(ids))
                           : SendGrpc(*stub, prompts[p], kind, ids);
    const absl::Duration took = absl::Now() - start;
    absl::MutexLock lock(&tally.mu);
    ++tally.sent;
    backoff = !o.ok && !o.dropped;
    if (took >= kClientDeadline - absl::Seconds(1)) {
      ++tally.hangs;
      tally.problems.push_back(
          absl::StrCat("request ", i, " hung for ", absl::FormatDuration(took)));
    } else if (o.dropped) {
      ++tally.dropped;
    } else if (o.ok && o.matches) {
      ++tally.completed;
      ++tally.by_kind[KindName(kind)];
    } else if (o.ok) {
      ++tally.wrong;
      tally.problems.push_back(absl::StrCat("request ", i, " (", KindName(kind), ", prompt ", p,
                                            ") completed with a different answer: ", o.got));
    } else {
      ++tally.errors[o.error_code];
      if (o.error_message.empty()) {
        tally.problems.push_back(absl::StrCat("request ", i, " failed without a message"));
      }
      LOG(INFO) << "request " << i << " (" << KindName(kind) << "): " << o.error_code << " "
                << o.error_message;
    }
  }
}

// ---------------------------------------------------------------------------
// Resources

struct Usage {
  int64_t rss_kib = 0;
  int fds = 0;
  int threads = 0;
};

Usage UsageOf(pid_t pid) {
  Usage u;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) u.rss_kib = std::stoll(line.substr(6));
    if (line.rfind("Threads:", 0) == 0) u.threads = std::stoi(line.substr(8));
  }
  if (DIR* d = opendir(absl::StrCat("/proc/", pid, "/fd").c_str())) {
    while (readdir(d) != nullptr) ++u.fds;
    u.fds -= 2;  // . and ..
    closedir(d);
  }
  return u;
}

// The router's usage over the run (the workers restart, so theirs start
// over): first and last samples, printed for the soak's slope.
struct UsageTrack {
  Usage first, last;
  int samples = 0;
};

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

std::string Join(const std::map<std::string, int>& m) {
  std::vector<std::string> parts;
  for (const auto& [k, n] : m) parts.push_back(absl::StrCat(k, "=", n));
  return absl::StrCat("{", absl::StrJoin(parts, ";"), "}");  // no spaces: scripts/soak.sh
}

TEST(ChaosTest, FailingWorkersNeverCorruptHangOrLeak) {
  if (testing::RealModelPath().empty()) GTEST_SKIP() << "real model not found";
  auto model = Model::Load(testing::RealModelPath());
  ASSERT_TRUE(model.ok());
  const uint32_t seed = static_cast<uint32_t>(EnvInt("PDSERVE_CHAOS_SEED", 7));
  const int total = EnvInt("PDSERVE_CHAOS_REQUESTS", 100);
  const std::vector<std::string> kinds =
      absl::StrSplit(EnvString("PDSERVE_CHAOS_FAULTS", "kill,term,stop"), ',', absl::SkipEmpty());
  ASSERT_FALSE(kinds.empty());
  const std::string kv_dtype = EnvString("PDSERVE_CHAOS_KV_DTYPE", "f16");
  const Reference want = MakeReference(**model, kv_dtype);

  LocalClusterOptions o;
  o.prefill = 2;
  o.decode = 2;
  o.kv_blocks = 256;
  o.extra_router_flags = {"--load_poll_ms=100", "--kv_wait_ms=4000",
                          "--prefill_attempt_timeout_ms=3000", "--breaker_cooldown_ms=1000",
                          "--rebalance_kv_utilization=0.5"};
  o.extra_worker_flags = {"--kv_dtype=" + kv_dtype};
  // A SIGTERMed decode worker moves every stream with its KV at once.
  o.extra_decode_flags = {"--drain_migration=all", "--drain_timeout_ms=3000"};
  // E.g. "--decode_failovers=0,--prefill_retries=0": the same chaos with
  // recovery turned off (docs/RELIABILITY.md compares both).
  if (const char* extra = std::getenv("PDSERVE_CHAOS_ROUTER_FLAGS"); extra != nullptr) {
    for (absl::string_view f : absl::StrSplit(extra, ',', absl::SkipEmpty())) {
      o.extra_router_flags.emplace_back(f);
    }
  }
  auto cluster = testing::StartCluster(o, "chaos");
  ASSERT_NE(cluster, nullptr);
  pid_t router_pid = -1;
  for (const ClusterProcess& p : cluster->processes()) {
    if (p.name == "router") router_pid = p.pid;
  }

  Tally tally;
  std::atomic<bool> stop{false};
  std::atomic<int> next{0}, running{kClients};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      RunClient(*cluster, **model, want, total, next, tally);
      if (running.fetch_sub(1) == 1) stop.store(true);
    });
  }
  UsageTrack router_usage;
  std::thread sampler([&] {
    while (!stop.load()) {
      const Usage u = UsageOf(router_pid);
      if (router_usage.samples++ == 0) router_usage.first = u;
      router_usage.last = u;
      absl::SleepFor(absl::Seconds(1));
    }
  });
  InjectFaults(*cluster, seed, kinds, stop, tally);
  for (std::thread& t : clients) t.join();
  sampler.join();

  // Every worker is running again; their pools must drain to idle.
  const bool idle = testing::PoolsIdle(*cluster, absl::Seconds(30));
  const int64_t leaked = BlocksInUse(*cluster);
  int faults = 0;
  for (const auto& [k, n] : tally.faults) faults += n;
  const std::string summary = absl::StrCat(
      "chaos summary: seed=", seed, " kv=", kv_dtype, " faults=", Join(tally.faults),
      " requests=", tally.sent, " completed=", tally.completed, " by_kind=", Join(tally.by_kind),
      " dropped=", tally.dropped, " errors=", Join(tally.errors), " wrong=", tally.wrong,
      " leaked_blocks=", leaked, " hangs=", tally.hangs,
      " router_rss_kib=", router_usage.first.rss_kib, "->", router_usage.last.rss_kib,
      " router_fds=", router_usage.first.fds, "->", router_usage.last.fds,
      " router_threads=", router_usage.first.threads, "->", router_usage.last.threads);
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
