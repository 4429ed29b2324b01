#include "tests/integration/chaos_harness.h"

#include <dirent.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
#include "tests/testing/engine_run.h"
#include "tests/testing/file_contents.h"
#include "tests/testing/http_test_client.h"
#include "tests/testing/tcp_cut_proxy.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_certificates.h"

namespace pdserve::chaos {
namespace {

using Json = nlohmann::json;

constexpr int kClients = 4;
constexpr int kDecodeWorkers = 2;
// Far beyond what any request needs; reaching it means the request hung.
const absl::Duration kClientDeadline = absl::Seconds(90);
const absl::Duration kClientBackoff = absl::Milliseconds(500);
// A slow HTTP reader's pause between reads of at most 1 KiB.
const absl::Duration kSlowReadPause = absl::Milliseconds(20);
constexpr float kTemperature = 0.8f;
constexpr uint64_t kSeed = 1234;
constexpr char kJsonRegex[] = R"(\{"answer": "[a-zA-Z ,.]{1,60}"\})";

// How a request is sent (request i is kind i % kNumKinds).
enum class Kind {
  kGreedy,
  kSampled,
  kConstrained,
  kHttpStream,
  kHttpSlow,
  kHttpUnary,
  kHttpDrop
};
constexpr int kNumKinds = 7;
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
    case Kind::kHttpSlow:
      return "http_slow";
    case Kind::kHttpUnary:
      return "http_unary";
    case Kind::kHttpDrop:
      return "http_drop";
  }
  return "?";
}
bool IsHttp(Kind k) { return k >= Kind::kHttpStream; }

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

std::string EnvString(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
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

// The prompt's tokens as the router makes them.
std::vector<int32_t> PromptIds(const Model& model, const Workload& w, size_t p) {
  const std::string text =
      w.chat ? *model.chat_template().Render({{"user", w.prompts[p]}}, true) : w.prompts[p];
  return model.tokenizer().EncodePrompt(text);
}

// The fault-free answer of each (prompt, kind), from the engine in-process.
// HTTP streams are greedy: their text is the greedy answer's.
using Reference = std::map<std::pair<size_t, Kind>, std::vector<int32_t>>;
Reference MakeReference(const Model& model, const Workload& w, const std::string& kv_dtype) {
  CpuModelRunner runner(model.config(), &model.weights(), 2);
  // The workers' KV element type: int8 KV has its own (exact) numerics.
  auto cache = KvCache::Create(KvLayout::ForModel(model.config(), 16, kv_dtype), 512);
  auto grammars = NewGrammarCompiler(model.tokenizer(), model.config().n_vocab);
  EXPECT_TRUE(grammars.ok()) << grammars.status();
  Engine engine(&model.tokenizer(), &runner, cache->get(), {});
  Reference out;
  for (size_t p = 0; p < w.prompts.size(); ++p) {
    for (Kind kind : {Kind::kGreedy, Kind::kSampled, Kind::kConstrained}) {
      SequenceOptions o;
      o.prompt = PromptIds(model, w, p);
      o.max_tokens = w.max_tokens;
      o.sampling = SamplingOf(kind);
      if (o.sampling.constraint.has_value())
        o.grammar = *(*grammars)->Compile(*o.sampling.constraint);
      out[{p, kind}] = testing::RunAlone(engine, model.tokenizer(), std::move(o));
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
  int cut_links = 0;  // KV connections cut by "cut" faults
  std::map<std::string, int> by_kind;  // completed, by kind
  std::map<std::string, int> errors;
  std::map<std::string, int> faults;
  std::vector<double> ttft_ms;  // completed gRPC streams
  std::vector<double> itl_ms;   // per token: a chunk's gap over its tokens
  std::vector<std::string> problems;
};

// ---------------------------------------------------------------------------
// Faults

struct Fault {
  std::string kind;    // kill, term, stop, cut
  std::string victim;  // prefill-N, decode-N
};

// Injects faults at random moments until `stop`; one worker is down at a
// time. Runs on the test's main thread: the workers die with the thread
// that started them (PR_SET_PDEATHSIG), so they must not be started from a
// short-lived one.
void InjectFaults(LocalCluster& cluster, std::vector<std::unique_ptr<testing::TcpCutProxy>>& kv_relays,
                  uint32_t seed, const std::vector<std::string>& kinds,
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
    // like a slow one until the watchdog, which the kill covers); a cut is
    // a decode worker's KV endpoint.
    const size_t first = f.kind == "cut" ? 2 : 0;
    const size_t last = f.kind == "stop" ? 1 : workers.size() - 1;
    f.victim = workers[std::uniform_int_distribution<size_t>(first, last)(rng)];
    LOG(INFO) << "chaos: " << f.kind << " " << f.victim;
    {
      absl::MutexLock lock(&tally.mu);
      ++tally.faults[f.kind];
    }
    if (f.kind == "cut") {
      const int cut = kv_relays[f.victim == "decode-0" ? 0 : 1]->CutAll();
      absl::MutexLock lock(&tally.mu);
      tally.cut_links += cut;
      continue;
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
  double ttft_ms = -1;
  std::vector<double> itl_ms;
};

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// A gRPC Generate, timed chunk by chunk.
Outcome SendGrpc(v1::Generation::Stub& stub, v1::GenerateRequest r, Kind kind,
                 const std::vector<int32_t>& want) {
  *r.mutable_sampling() = ToProto(SamplingOf(kind));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(kClientDeadline));
  const absl::Time start = absl::Now();
  absl::Time last = start;
  auto reader = stub.Generate(&ctx, r);
  Outcome out;
  std::vector<int32_t> ids;
  v1::GenerateResponse msg;
  while (reader->Read(&msg)) {
    if (!msg.has_chunk() || msg.chunk().token_ids_size() == 0) continue;
    const absl::Time now = absl::Now();
    if (out.ttft_ms < 0) {
      out.ttft_ms = Ms(now - start);
    } else {
      out.itl_ms.push_back(Ms(now - last) / msg.chunk().token_ids_size());
    }
    last = now;
    out.got += msg.chunk().text();
    ids.insert(ids.end(), msg.chunk().token_ids().begin(), msg.chunk().token_ids().end());
  }
  const grpc::Status s = reader->Finish();
  out.ok = s.ok();
  out.error_code = absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code()));
  out.error_message = s.error_message();
  out.matches = ids == want;
  return out;
}

struct HttpTarget {
  std::string path;
  std::string body;
};

HttpTarget HttpRequestOf(const Workload& w, const std::string& prompt, bool stream) {
  Json j = {{"max_tokens", w.max_tokens}, {"temperature", 0}, {"stream", stream}};
  if (w.chat) {
    j["messages"] = {{{"role", "user"}, {"content", prompt}}};
    return {"/v1/chat/completions", j.dump()};
  }
  j["prompt"] = prompt;
  return {"/v1/completions", j.dump()};
}

// Connects, sends, and hangs up after the first event.
Outcome SendAndHangUp(const std::string& address, const HttpTarget& t) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  socket.connect(testing::internal::Endpoint(address), ec);
  const std::string request = absl::StrCat(
      "POST ", t.path, " HTTP/1.1\r\nHost: ", address,
      "\r\nContent-Type: application/json\r\nContent-Length: ", t.body.size(), "\r\n\r\n", t.body);
  if (!ec) asio::write(socket, asio::buffer(request), ec);
  std::string got;
  char buf[4096];
  while (!ec && got.find("data: ") == std::string::npos) {
    got.append(buf, socket.read_some(asio::buffer(buf), ec));
  }
  Outcome out;
  out.dropped = true;
  return out;  // the socket closes here, mid-stream
}

// A completion over HTTP in one response (stream false).
Outcome SendHttpUnary(const std::string& address, const HttpTarget& t,
                      const std::string& want_text) {
  const testing::HttpResult r = testing::HttpCall(address, "POST", t.path, t.body);
  const Json j = Json::parse(r.body, nullptr, false);
  std::string text;
  if (r.status == 200 && j.contains("choices") && !j["choices"].empty()) {
    const Json& choice = j["choices"][0];
    if (choice.contains("text") && choice["text"].is_string()) text = choice["text"];
    if (choice.contains("message") && choice["message"].contains("content") &&
        choice["message"]["content"].is_string()) {
      text = choice["message"]["content"];
    }
  }
  Outcome out;
  out.ok = r.status == 200;
  out.error_code = absl::StrCat("HTTP_", r.status);
  out.error_message = r.body;
  out.matches = text == want_text;
  out.got = text;
  return out;
}

// A streamed completion over HTTP, read at full speed or slowly.
Outcome SendHttp(const std::string& address, const HttpTarget& t, bool slow,
                 const std::string& want_text) {
  const testing::HttpResult r =
      slow ? testing::HttpCallSlowly(address, "POST", t.path, t.body, kSlowReadPause)
           : testing::HttpCall(address, "POST", t.path, t.body);
  std::string text;
  std::string error;
  for (const std::string& e : r.Events()) {
    if (e == "[DONE]") continue;
    const Json j = Json::parse(e, nullptr, false);
    if (j.contains("error")) error = j["error"].value("message", "error event");
    if (!j.contains("choices") || j["choices"].empty()) continue;
    const Json& choice = j["choices"][0];
    if (choice.contains("text") && choice["text"].is_string()) text += choice["text"];
    if (choice.contains("delta") && choice["delta"].contains("content") &&
        choice["delta"]["content"].is_string()) {
      text += choice["delta"]["content"];
    }
  }
  Outcome out;
  out.ok = r.status == 200 && error.empty() && r.body.find("data: [DONE]") != std::string::npos;
  out.error_code = r.status == 200 ? "HTTP_STREAM_ERROR" : absl::StrCat("HTTP_", r.status);
  out.error_message = r.status == 200 ? error : r.body;
  out.matches = text == want_text;
  out.got = text;
  return out;
}

void Record(int i, size_t p, Kind kind, const Outcome& o, absl::Duration took, Tally& tally)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(tally.mu) {
  ++tally.sent;
  if (took >= kClientDeadline - absl::Seconds(1)) {
    ++tally.hangs;
    tally.problems.push_back(absl::StrCat("request ", i, " hung for ", absl::FormatDuration(took)));
  } else if (o.dropped) {
    ++tally.dropped;
  } else if (o.ok && o.matches) {
    ++tally.completed;
    ++tally.by_kind[KindName(kind)];
    if (o.ttft_ms >= 0) tally.ttft_ms.push_back(o.ttft_ms);
    tally.itl_ms.insert(tally.itl_ms.end(), o.itl_ms.begin(), o.itl_ms.end());
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

void RunClient(const LocalCluster& cluster, const Model& model, const Workload& w,
               const Reference& want, int total, std::atomic<int>& next, Tally& tally) {
  auto stub = testing::RouterStub(cluster.router_address());
  // Like a real client, back off after an error instead of burning the rest
  // of the load within a moment while no worker of a tier is live.
  bool backoff = false;
  for (int i = next.fetch_add(1); i < total; i = next.fetch_add(1)) {
    if (backoff) absl::SleepFor(kClientBackoff);
    const size_t p = static_cast<size_t>(i / kNumKinds) % w.prompts.size();
    const Kind kind = static_cast<Kind>(i % kNumKinds);
    const std::vector<int32_t>& ids = want.at({p, IsHttp(kind) ? Kind::kGreedy : kind});
    const absl::Time start = absl::Now();
    Outcome o;
    if (kind == Kind::kHttpDrop) {
      o = SendAndHangUp(cluster.http_address(), HttpRequestOf(w, w.prompts[p], true));
    } else if (kind == Kind::kHttpUnary) {
      o = SendHttpUnary(cluster.http_address(), HttpRequestOf(w, w.prompts[p], false),
                        model.tokenizer().Decode(ids));
    } else if (IsHttp(kind)) {
      o = SendHttp(cluster.http_address(), HttpRequestOf(w, w.prompts[p], true),
                   kind == Kind::kHttpSlow, model.tokenizer().Decode(ids));
    } else {
      o = SendGrpc(*stub,
                   w.chat ? testing::ChatRequest(w.prompts[p], w.max_tokens)
                          : testing::TextRequest(w.prompts[p], w.max_tokens),
                   kind, ids);
    }
    const absl::Duration took = absl::Now() - start;
    absl::MutexLock lock(&tally.mu);
    backoff = !o.ok && !o.dropped;
    Record(i, p, kind, o, took, tally);
  }
}

// ---------------------------------------------------------------------------
// Resources and the summary

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
int64_t BlocksInUse(const LocalCluster& cluster,
                    const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  int64_t used = 0;
  for (const std::string& a : cluster.addresses("decode")) {
    auto l = testing::DecodeLoad(a, creds);
    used += l.ok() ? l->kv_blocks_total() - l->kv_blocks_free() : 1 << 20;
  }
  for (const std::string& a : cluster.addresses("prefill")) {
    auto l = testing::PrefillLoad(a, creds);
    used += l.ok() ? l->kv_blocks_total() - l->kv_blocks_free() : 1 << 20;
  }
  return used;
}

// --kv_tls: every worker serves its KV plane and gRPC port with one
// certificate and requires its peers' (the router's client certificate,
// other workers' KV connections); the test reaches the workers with the
// router's. Returns the test's credentials, null without openssl.
std::shared_ptr<grpc::ChannelCredentials> EnableKvTls(const std::string& dir,
                                                      LocalClusterOptions& o) {
  if (!testing::MakeTestCertificates(dir)) return nullptr;
  const std::string ca = dir + "/ca.pem";
  o.extra_worker_flags.insert(o.extra_worker_flags.end(),
                              {"--kv_tls", "--tls_cert=" + dir + "/server.pem",
                               "--tls_key=" + dir + "/server.key", "--tls_client_ca=" + ca});
  o.extra_router_flags.insert(o.extra_router_flags.end(),
                              {"--worker_tls_ca=" + ca, "--worker_tls_cert=" + dir + "/client.pem",
                               "--worker_tls_key=" + dir + "/client.key"});
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = testing::FileContents(ca);
  ssl.pem_cert_chain = testing::FileContents(dir + "/client.pem");
  ssl.pem_private_key = testing::FileContents(dir + "/client.key");
  return grpc::SslCredentials(ssl);
}

std::string Join(const std::map<std::string, int>& m) {
  std::vector<std::string> parts;
  for (const auto& [k, n] : m) parts.push_back(absl::StrCat(k, "=", n));
  return absl::StrCat("{", absl::StrJoin(parts, ";"), "}");  // no spaces: scripts/soak.sh
}

// The q-quantile (nearest rank) of `v`, in ms with one decimal; "-" if empty.
std::string Quantile(std::vector<double> v, double q) {
  if (v.empty()) return "-";
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return absl::StrFormat("%.1f", v[std::clamp<size_t>(rank, 1, v.size()) - 1]);
}

}  // namespace

void Run(const Workload& w) {
  if (w.model_path.empty()) GTEST_SKIP() << "model for " << w.name << " not found";
  auto model = Model::Load(w.model_path);
  ASSERT_TRUE(model.ok()) << model.status();
  const uint32_t seed = static_cast<uint32_t>(EnvInt("PDSERVE_CHAOS_SEED", 7));
  const int total = EnvInt("PDSERVE_CHAOS_REQUESTS", w.requests);
  const std::string fault_list = EnvString("PDSERVE_CHAOS_FAULTS", "kill,term,stop,cut");
  std::vector<std::string> kinds;
  if (fault_list != "none") kinds = absl::StrSplit(fault_list, ',', absl::SkipEmpty());
  const std::string kv_dtype = EnvString("PDSERVE_CHAOS_KV_DTYPE", "f16");
  std::vector<size_t> prompt_tokens;
  for (size_t p = 0; p < w.prompts.size(); ++p) {
    prompt_tokens.push_back(PromptIds(**model, w, p).size());
    ASSERT_GE(prompt_tokens.back(), static_cast<size_t>(w.min_prompt_tokens)) << "prompt " << p;
  }
  LOG(INFO) << "chaos: " << w.name << " prompts of " << absl::StrJoin(prompt_tokens, ", ")
            << " tokens";
  const Reference want = MakeReference(**model, w, kv_dtype);

  LocalClusterOptions o;
  o.model = w.model_path;
  o.prefill = 2;
  o.decode = kDecodeWorkers;
  o.kv_blocks = w.kv_blocks;
  o.extra_router_flags = {"--load_poll_ms=100", "--kv_wait_ms=4000",
                          "--prefill_attempt_timeout_ms=3000", "--breaker_cooldown_ms=1000",
                          "--rebalance_kv_utilization=0.5"};
  o.extra_worker_flags = {"--kv_dtype=" + kv_dtype};
  // A SIGTERMed decode worker moves every stream with its KV at once.
  o.extra_decode_flags = {"--drain_migration=all", "--drain_timeout_ms=3000"};
  // Each decode worker's KV endpoint, as prefill workers and migrating
  // peers see it, is a relay in this process that "cut" faults break.
  std::vector<std::unique_ptr<testing::TcpCutProxy>> kv_relays;
  for (int i = 0; i < kDecodeWorkers; ++i) {
    const int kv_port = testing::FreeLoopbackPort();
    kv_relays.push_back(std::make_unique<testing::TcpCutProxy>(kv_port));
    o.extra_process_flags[absl::StrCat("decode-", i)] = {
        absl::StrCat("--kv_listen=127.0.0.1:", kv_port),
        absl::StrCat("--kv_advertise=127.0.0.1:", kv_relays.back()->port())};
  }
  const bool kv_tls = w.kv_tls || EnvInt("PDSERVE_CHAOS_KV_TLS", 0) == 1;
  std::shared_ptr<grpc::ChannelCredentials> worker_creds = grpc::InsecureChannelCredentials();
  if (kv_tls) {
    worker_creds = EnableKvTls(testing::TestTempDir("chaos-" + w.name + "-certs"), o);
    if (worker_creds == nullptr) GTEST_SKIP() << "openssl CLI not available to make certificates";
  }
  // E.g. "--decode_failovers=0,--prefill_retries=0": the same chaos with
  // recovery turned off (docs/RELIABILITY.md compares both).
  if (const char* extra = std::getenv("PDSERVE_CHAOS_ROUTER_FLAGS"); extra != nullptr) {
    for (absl::string_view f : absl::StrSplit(extra, ',', absl::SkipEmpty())) {
      o.extra_router_flags.emplace_back(f);
    }
  }
  auto cluster = testing::StartCluster(o, "chaos-" + w.name);
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
      RunClient(*cluster, **model, w, want, total, next, tally);
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
  if (kinds.empty()) {
    while (!stop.load()) absl::SleepFor(absl::Milliseconds(50));
  } else {
    InjectFaults(*cluster, kv_relays, seed, kinds, stop, tally);
  }
  for (std::thread& t : clients) t.join();
  sampler.join();

  // Every worker is running again; their pools must drain to idle.
  const bool idle = testing::PoolsIdle(*cluster, absl::Seconds(30), worker_creds);
  const int64_t leaked = BlocksInUse(*cluster, worker_creds);
  int faults = 0;
  for (const auto& [k, n] : tally.faults) faults += n;
  const std::string summary = absl::StrCat(
      "chaos summary: model=", w.name, " seed=", seed, " kv=", kv_dtype,
      " kv_tls=", kv_tls ? "on" : "off",
      " faults=", Join(tally.faults), " cut_links=", tally.cut_links, " requests=", tally.sent,
      " completed=", tally.completed, " by_kind=", Join(tally.by_kind),
      " dropped=", tally.dropped, " errors=", Join(tally.errors), " wrong=", tally.wrong,
      " leaked_blocks=", leaked, " hangs=", tally.hangs,
      " ttft_ms_p50=", Quantile(tally.ttft_ms, 0.5), " ttft_ms_p99=", Quantile(tally.ttft_ms, 0.99),
      " itl_ms_p50=", Quantile(tally.itl_ms, 0.5), " itl_ms_p99=", Quantile(tally.itl_ms, 0.99),
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
  if (!kinds.empty()) EXPECT_GT(faults, 0);
  EXPECT_GT(tally.completed, 0);
}

}  // namespace pdserve::chaos
