#include "router/placement/placement_policy.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/request/block_hash.h"
#include "gtest/gtest.h"
#include "router/placement/placement_ledger.h"
#include "router/placement/prefix_hit.h"

namespace pdserve::router {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1000);

v1::KvLayout Layout(uint32_t layers = 2, uint32_t block = 16, const char* dtype = "f16") {
  v1::KvLayout l;
  l.set_num_layers(layers);
  l.set_num_kv_heads(2);
  l.set_head_dim(16);
  l.set_block_size(block);
  l.set_dtype(dtype);
  return l;
}

// A worker row of a table; chained setters keep the rows short.
struct W {
  W(const char* a) : address(a) {}  // NOLINT: implicit, for table rows
  W& Total(uint32_t n) {
    total_blocks = n;
    return *this;
  }
  W& Free(uint32_t n) {
    free_blocks = n;
    return *this;
  }
  W& Seqs(uint32_t r, uint32_t w) {
    running = r;
    waiting = w;
    return *this;
  }
  W& Queued(uint64_t n) {
    queued_tokens = n;
    return *this;
  }
  W& Waiting(uint32_t n) {
    waiting = n;
    return *this;
  }
  W& Fp(const char* f) {
    fingerprint = f;
    return *this;
  }
  W& Kv(v1::KvLayout l) {
    layout = std::move(l);
    return *this;
  }
  W& Protocol(uint32_t p) {
    protocol = p;
    return *this;
  }
  W& Dead() {
    live = false;
    return *this;
  }
  W& Draining() {
    draining = true;
    return *this;
  }
  W& Age(absl::Duration a) {
    age = a;
    return *this;
  }
  // The load report's cached_block_keys (Make sorts them).
  W& Keys(std::vector<uint64_t> k) {
    keys = std::move(k);
    return *this;
  }

  std::string address;
  uint32_t free_blocks = 100;
  uint32_t total_blocks = 0;  // 0: not reported
  uint32_t running = 0;
  uint32_t waiting = 0;
  uint64_t queued_tokens = 0;
  std::string fingerprint = "fp";
  v1::KvLayout layout = Layout();
  uint32_t protocol = 1;
  bool live = true;
  bool draining = false;
  absl::Duration age = absl::ZeroDuration();  // since the last report
  std::vector<uint64_t> keys;
};

WorkerState Make(const W& w, v1::WorkerRole role) {
  WorkerState s;
  s.address = w.address;
  s.role = role;
  s.live = w.live;
  s.has_info = true;
  s.info.set_model_fingerprint(w.fingerprint);
  *s.info.mutable_kv_layout() = w.layout;
  s.info.set_protocol_version(w.protocol);
  s.load.set_kv_blocks_free(w.free_blocks);
  s.load.set_kv_blocks_total(w.total_blocks);
  s.load.set_running(w.running);
  s.load.set_waiting(w.waiting);
  s.load.set_queued_prompt_tokens(w.queued_tokens);
  s.load.set_draining(w.draining);
  s.last_report = kNow - w.age;
  std::vector<uint64_t> keys = w.keys;
  std::sort(keys.begin(), keys.end());
  s.load.mutable_cached_block_keys()->Add(keys.begin(), keys.end());
  return s;
}

RegistrySnapshot Snapshot(const std::vector<W>& decode, const std::vector<W>& prefill) {
  RegistrySnapshot s;
  for (const W& w : decode) s.decode.push_back(Make(w, v1::WORKER_ROLE_DECODE));
  for (const W& w : prefill) s.prefill.push_back(Make(w, v1::WORKER_ROLE_PREFILL));
  return s;
}

struct DecodeCase {
  std::string name;
  std::vector<W> workers;
  PolicyKind policy = PolicyKind::kLeastLoaded;
  int32_t prompt_tokens = 16;
  std::vector<std::string> excluded;
  std::vector<std::string> ejected;
  uint64_t ticket = 0;
  std::string fingerprint = "fp";
  std::string want;  // chosen address, or empty when an error is expected
  absl::StatusCode want_code = absl::StatusCode::kOk;
};

std::vector<DecodeCase> DecodeCases() {
  const auto kLeast = PolicyKind::kLeastLoaded;
  const auto kRr = PolicyKind::kRoundRobin;
  return {
      {.name = "most free blocks wins",
       .workers = {W("a").Free(10), W("b").Free(50), W("c").Free(30)},
       .want = "b"},
      {.name = "ties on blocks go to fewest sequences",
       .workers = {W("a").Free(50).Seqs(3, 1), W("b").Free(50).Seqs(1, 1),
                   W("c").Free(50).Seqs(2, 2)},
       .want = "b"},
      {.name = "exact ties rotate with the ticket",
       .workers = {W("a").Free(50), W("b").Free(50)},
       .ticket = 1,
       .want = "b"},
      {.name = "exact ties rotate with the ticket (2)",
       .workers = {W("a").Free(50), W("b").Free(50)},
       .ticket = 2,
       .want = "a"},
      {.name = "workers whose blocks fit the prompt come first",
       .workers = {W("a").Free(3), W("b").Free(4).Seqs(9, 9)},
       .prompt_tokens = 64,
       .want = "b"},
      {.name = "none fits: still the best one (reports lag)",
       .workers = {W("a").Free(1), W("b").Free(2)},
       .prompt_tokens = 1000,
       .want = "b"},
      {.name = "dead, draining and stale workers are skipped",
       .workers = {W("a").Free(90).Dead(), W("b").Free(80).Draining(),
                   W("c").Free(70).Age(absl::Seconds(10)), W("d").Free(1)},
       .want = "d"},
      {.name = "excluded workers are skipped",
       .workers = {W("a").Free(90), W("b").Free(10)},
       .excluded = {"a"},
       .want = "b"},
      {.name = "circuit-broken workers are avoided",
       .workers = {W("a").Free(90), W("b").Free(10)},
       .ejected = {"a"},
       .want = "b"},
      {.name = "circuit-broken ones are used when nothing else is left",
       .workers = {W("a").Free(90), W("b").Free(10)},
       .excluded = {"b"},
       .ejected = {"a"},
       .want = "a"},
      {.name = "round robin follows the ticket",
       .workers = {W("a").Free(1), W("b").Free(99), W("c").Free(50)},
       .policy = kRr,
       .ticket = 4,
       .want = "b"},
      {.name = "round robin skips unusable workers",
       .workers = {W("a").Dead(), W("b"), W("c")},
       .policy = kRr,
       .ticket = 1,
       .want = "c"},
      {.name = "no live worker",
       .workers = {W("a").Dead()},
       .want_code = absl::StatusCode::kUnavailable},
      {.name = "no worker at all", .workers = {}, .want_code = absl::StatusCode::kUnavailable},
      {.name = "every worker refused",
       .workers = {W("a"), W("b")},
       .policy = kLeast,
       .excluded = {"a", "b"},
       .want_code = absl::StatusCode::kResourceExhausted},
      {.name = "wrong model everywhere",
       .workers = {W("a").Fp("other")},
       .want_code = absl::StatusCode::kFailedPrecondition},
      {.name = "wrong model is skipped",
       .workers = {W("a").Free(99).Fp("other"), W("b").Free(1)},
       .want = "b"},
      {.name = "empty router fingerprint skips the check",
       .workers = {W("a").Fp("x")},
       .fingerprint = "",
       .want = "a"},
  };
}

TEST(RoutingPolicyTest, PickDecode) {
  for (const DecodeCase& c : DecodeCases()) {
    SCOPED_TRACE(c.name);
    const RegistrySnapshot snapshot = Snapshot(c.workers, {});
    DecodeQuery q;
    q.policy = c.policy;
    q.prompt_tokens = c.prompt_tokens;
    q.model_fingerprint = c.fingerprint;
    q.excluded = c.excluded;
    q.ejected = c.ejected;
    q.ticket = c.ticket;
    q.now = kNow;
    absl::StatusOr<const WorkerState*> got = PickDecode(snapshot, q);
    if (c.want.empty()) {
      EXPECT_EQ(got.status().code(), c.want_code) << got.status();
    } else {
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ((*got)->address, c.want);
    }
  }
}

struct PrefillCase {
  std::string name;
  std::vector<W> workers;
  PolicyKind policy = PolicyKind::kLeastLoaded;
  std::vector<std::string> excluded;
  std::vector<std::string> ejected;
  uint64_t ticket = 0;
  std::string want;
  absl::StatusCode want_code = absl::StatusCode::kOk;
  std::string want_message;  // a substring of the error
};

std::vector<PrefillCase> PrefillCases() {
  using absl::StatusCode;
  return {
      {.name = "fewest queued prompt tokens",
       .workers = {W("p1").Queued(500), W("p2").Queued(20)},
       .want = "p2"},
      {.name = "ties on queue go to fewest waiting",
       .workers = {W("p1").Waiting(3), W("p2").Waiting(1)},
       .want = "p2"},
      {.name = "round robin",
       .workers = {W("p1"), W("p2"), W("p3")},
       .policy = PolicyKind::kRoundRobin,
       .ticket = 5,
       .want = "p3"},
      {.name = "no live prefill worker",
       .workers = {W("p1").Dead()},
       .want_code = StatusCode::kNotFound},
      {.name = "no prefill worker configured", .workers = {}, .want_code = StatusCode::kNotFound},
      {.name = "incompatible fingerprint",
       .workers = {W("p1").Fp("abc")},
       .want_code = StatusCode::kFailedPrecondition,
       .want_message = "prefill worker p1 model fingerprint abc != decode worker d fp"},
      {.name = "incompatible block size",
       .workers = {W("p1").Kv(Layout(2, 32))},
       .want_code = StatusCode::kFailedPrecondition,
       .want_message = "block_size=32"},
      {.name = "incompatible dtype",
       .workers = {W("p1").Kv(Layout(2, 16, "bf16"))},
       .want_code = StatusCode::kFailedPrecondition,
       .want_message = "kv dtype mismatch: prefill worker p1 stores bf16 KV"},
      {.name = "int8 prefill with an f16 decode worker",
       .workers = {W("p1").Kv(Layout(2, 16, "int8"))},
       .want_code = StatusCode::kFailedPrecondition,
       .want_message = "prefill worker p1 stores int8 KV, decode worker d stores f16 KV (start "
                       "both tiers with the same --kv_dtype)"},
      {.name = "incompatible sliding windows",
       .workers = {W("p1").Kv([] {
         v1::KvLayout l = Layout();
         l.add_layer_window(512);
         l.add_layer_window(0);
         return l;
       }())},
       .want_code = StatusCode::kFailedPrecondition,
       .want_message = "windows=512,0"},
      {.name = "incompatible layer count",
       .workers = {W("p1").Kv(Layout(3))},
       .want_code = StatusCode::kFailedPrecondition,
       .want_message = "layers=3"},
      {.name = "incompatible protocol",
       .workers = {W("p1").Protocol(2)},
       .want_code = StatusCode::kFailedPrecondition,
       .want_message = "protocol version 2"},
      {.name = "incompatible ones are skipped",
       .workers = {W("p1").Fp("abc"), W("p2").Queued(999)},
       .want = "p2"},
      {.name = "every compatible one excluded",
       .workers = {W("p1")},
       .excluded = {"p1"},
       .want_code = StatusCode::kUnavailable},
      {.name = "a retry skips the prefill worker that failed",
       .workers = {W("p1"), W("p2").Queued(999)},
       .excluded = {"p1"},
       .want = "p2"},
      {.name = "circuit-broken prefill workers are avoided",
       .workers = {W("p1"), W("p2").Queued(999)},
       .ejected = {"p1"},
       .want = "p2"},
      {.name = "every live one circuit-broken: still served",
       .workers = {W("p1"), W("p2").Queued(999)},
       .ejected = {"p1", "p2"},
       .want = "p1"},
  };
}

TEST(RoutingPolicyTest, PickPrefill) {
  const WorkerState decode = Make(W("d"), v1::WORKER_ROLE_DECODE);
  for (const PrefillCase& c : PrefillCases()) {
    SCOPED_TRACE(c.name);
    const RegistrySnapshot snapshot = Snapshot({}, c.workers);
    PrefillQuery q;
    q.policy = c.policy;
    q.excluded = c.excluded;
    q.ejected = c.ejected;
    q.ticket = c.ticket;
    q.now = kNow;
    absl::StatusOr<const WorkerState*> got = PickPrefill(snapshot, decode, q);
    if (c.want.empty()) {
      EXPECT_EQ(got.status().code(), c.want_code) << got.status();
      EXPECT_NE(got.status().message().find(c.want_message), absl::string_view::npos)
          << got.status();
    } else {
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ((*got)->address, c.want);
    }
  }
}

struct PlacementCase {
  std::string name;
  std::vector<W> prefill;
  bool colocated = false;
  int32_t local_max = 0;
  int32_t prompt_tokens = 100;
  bool want_local = false;
  absl::StatusCode want_code = absl::StatusCode::kOk;
  std::string want_reason = "";  // checked when set
};

TEST(RoutingPolicyTest, PlaceRequestChoosesThePrefillMode) {
  const std::vector<PlacementCase> cases = {
      {.name = "remote when a compatible prefill worker is live", .prefill = {W("p")}},
      {.name = "colocated mode is always local",
       .prefill = {W("p")},
       .colocated = true,
       .want_local = true},
      {.name = "short prompts are local",
       .prefill = {W("p")},
       .local_max = 100,
       .want_local = true},
      {.name = "longer prompts are remote", .prefill = {W("p")}, .local_max = 99},
      {.name = "no live prefill worker: local", .prefill = {W("p").Dead()}, .want_local = true},
      {.name = "no prefill tier: local", .prefill = {}, .want_local = true},
      // A tier rolled over before the other: serve, prefilling locally.
      {.name = "only incompatible prefill workers: local",
       .prefill = {W("p").Fp("zz")},
       .want_local = true,
       .want_reason = "no_compatible_prefill_worker"},
      {.name = "only another protocol version: local",
       .prefill = {W("p").Protocol(2)},
       .want_local = true,
       .want_reason = "no_compatible_prefill_worker"},
      {.name = "colocated ignores incompatible prefill workers",
       .prefill = {W("p").Fp("zz")},
       .colocated = true,
       .want_local = true},
  };
  for (const PlacementCase& c : cases) {
    SCOPED_TRACE(c.name);
    const RegistrySnapshot snapshot = Snapshot({W("d")}, c.prefill);
    PlacementQuery q;
    q.decode.prompt_tokens = c.prompt_tokens;
    q.decode.model_fingerprint = "fp";
    q.decode.now = q.prefill.now = kNow;
    q.colocated = c.colocated;
    q.local_prefill_max_tokens = c.local_max;
    absl::StatusOr<Placement> got = PlaceRequest(snapshot, q);
    if (c.want_code != absl::StatusCode::kOk) {
      EXPECT_EQ(got.status().code(), c.want_code) << got.status();
      continue;
    }
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->decode->address, "d");
    EXPECT_EQ(got->local_prefill, c.want_local);
    if (!c.want_reason.empty()) EXPECT_EQ(std::string(got->reason), c.want_reason);
  }
}

// A request whose reservation no usable pool could ever hold: the pools
// that can are preferred whatever their load, and with none it is
// OUT_OF_RANGE (retrying cannot help), not RESOURCE_EXHAUSTED.
TEST(RoutingPolicyTest, PickDecodeSkipsPoolsThatCanNeverHoldTheRequest) {
  DecodeQuery q;
  q.prompt_tokens = 100;
  q.max_tokens = 100;  // 199 tokens reserved: 13 blocks of 16
  q.now = kNow;
  const RegistrySnapshot mixed =
      Snapshot({W("small").Total(12).Free(12), W("big").Total(64).Free(10)}, {});
  absl::StatusOr<const WorkerState*> got = PickDecode(mixed, q);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)->address, "big");

  const RegistrySnapshot small = Snapshot({W("a").Total(12), W("b").Total(8)}, {});
  got = PickDecode(small, q);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kOutOfRange) << got.status();
  EXPECT_NE(
      got.status().message().find("need 13 KV blocks; the largest decode worker pool holds 12"),
      std::string::npos)
      << got.status();

  q.max_tokens = 0;  // unknown: no such check
  EXPECT_TRUE(PickDecode(small, q).ok());
  const RegistrySnapshot unreported = Snapshot({W("c")}, {});
  q.max_tokens = 100;
  EXPECT_TRUE(PickDecode(unreported, q).ok());
}

// A pool switched over tier by tier: the decode worker that would win on
// load has no prefill worker to pair with, so the next one takes it; when
// none pairs, the best one prefills locally.
TEST(RoutingPolicyTest, PlaceRequestSkipsDecodeWorkersNoPrefillWorkerPairsWith) {
  W int8_decode = W("d-int8").Free(200);  // the least loaded
  int8_decode.layout = Layout(2, 16, "int8");
  PlacementQuery q;
  q.decode.prompt_tokens = 100;
  q.decode.model_fingerprint = "fp";
  q.decode.now = q.prefill.now = kNow;
  const RegistrySnapshot mixed = Snapshot({int8_decode, W("d-f16")}, {W("p")});
  absl::StatusOr<Placement> got = PlaceRequest(mixed, q);  // points into `mixed`
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->decode->address, "d-f16");
  EXPECT_FALSE(got->local_prefill);

  const RegistrySnapshot int8_only = Snapshot({int8_decode}, {W("p")});
  got = PlaceRequest(int8_only, q);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->decode->address, "d-int8");
  EXPECT_TRUE(got->local_prefill);
  EXPECT_EQ(std::string(got->reason), "no_compatible_prefill_worker");
}

// A 256-token prompt: 16 blocks of 16 tokens.
std::vector<int32_t> Prompt(int32_t first = 1) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < 256; ++i) p.push_back(first + i);
  return p;
}

// The chain keys of the first `n` blocks of `prompt` with `block_size`.
std::vector<uint64_t> Held(int n, const std::vector<int32_t>& prompt = Prompt(),
                           int32_t block_size = 16) {
  std::vector<uint64_t> keys = FullBlockKeys(prompt, block_size);
  keys.resize(n);
  return keys;
}

struct PrefixHitCase {
  std::string name;
  std::vector<uint64_t> held;
  int prompt_blocks = 16;
  int32_t block_size = 16;
  int32_t want = 0;
};

TEST(PrefixHitTest, DeepestPublishedPromptKeyIsTheHit) {
  const std::vector<uint64_t> all = FullBlockKeys(Prompt(), 16);
  const std::vector<PrefixHitCase> cases = {
      {.name = "empty summary", .held = {}, .want = 0},
      {.name = "first three blocks", .held = Held(3), .want = 48},
      {.name = "whole prompt", .held = Held(16), .want = 256},
      {.name = "only a deep key (truncated summary)", .held = {all[9]}, .want = 160},
      {.name = "another prompt's keys", .held = Held(16, Prompt(1000)), .want = 0},
      {.name = "keys beyond the prompt are ignored",
       .held = Held(16),
       .prompt_blocks = 4,
       .want = 64},
      {.name = "no block size", .held = Held(3), .block_size = 0, .want = 0},
  };
  for (const PrefixHitCase& c : cases) {
    SCOPED_TRACE(c.name);
    v1::LoadReport load;
    std::vector<uint64_t> held = c.held;
    std::sort(held.begin(), held.end());
    load.mutable_cached_block_keys()->Add(held.begin(), held.end());
    std::vector<uint64_t> prompt_keys(all.begin(), all.begin() + c.prompt_blocks);
    EXPECT_EQ(PrefixHitTokens(load, prompt_keys, c.block_size), c.want);
  }
}

TEST(PrefixHitTest, PromptKeysHashWithEachWorkersBlockSize) {
  const std::vector<int32_t> prompt = Prompt();
  PromptKeys keys(prompt);
  EXPECT_EQ(keys.HitTokens(Make(W("a").Keys(Held(2)), v1::WORKER_ROLE_DECODE)), 32);
  EXPECT_EQ(keys.HitTokens(
                Make(W("b").Kv(Layout(2, 32)).Keys(Held(3, prompt, 32)), v1::WORKER_ROLE_DECODE)),
            96);
  // Block-16 keys mean nothing to a block-32 worker.
  EXPECT_EQ(keys.HitTokens(Make(W("c").Kv(Layout(2, 32)).Keys(Held(8)), v1::WORKER_ROLE_DECODE)),
            0);
}

struct PrefixAwareCase {
  std::string name;
  std::vector<W> workers;
  uint64_t ticket = 0;
  std::string want;
};

TEST(RoutingPolicyTest, PrefixAwareDecode) {
  // Cost = uncached prompt tokens + 64 per running or waiting sequence.
  const std::vector<PrefixAwareCase> cases = {
      {.name = "no cache anywhere: fewest sequences",
       .workers = {W("a").Seqs(2, 0), W("b").Seqs(0, 1), W("c").Seqs(1, 1)},
       .want = "b"},
      {.name = "no cache, equal sequences: most free blocks",
       .workers = {W("a").Free(50), W("b").Free(90)},
       .want = "b"},
      {.name = "deepest hit wins at equal load",
       .workers = {W("a").Keys(Held(3)), W("b").Keys(Held(12)), W("c")},
       .want = "b"},
      {.name = "a long hit outweighs a little load (64+64 < 256)",
       .workers = {W("a").Keys(Held(12)).Seqs(1, 0), W("b")},
       .want = "a"},
      {.name = "load outweighs a short hit (240+64 > 256)",
       .workers = {W("a").Keys(Held(1)).Seqs(1, 0), W("b")},
       .want = "b"},
      {.name = "a cached worker without room for the rest is passed over",
       .workers = {W("a").Keys(Held(12)).Free(3), W("b")},
       .want = "b"},
      {.name = "its free blocks need only fit the uncached part",
       .workers = {W("a").Keys(Held(12)).Free(4), W("b")},
       .want = "a"},
      {.name = "another prompt's cache is no hit",
       .workers = {W("a").Keys(Held(16, Prompt(1000))).Seqs(0, 1), W("b")},
       .want = "b"},
      {.name = "equal hits and load rotate with the ticket",
       .workers = {W("a").Keys(Held(4)), W("b").Keys(Held(4))},
       .ticket = 1,
       .want = "b"},
      {.name = "unusable workers are skipped despite their cache",
       .workers = {W("a").Keys(Held(16)).Draining(), W("b")},
       .want = "b"},
  };
  const std::vector<int32_t> prompt = Prompt();
  for (const PrefixAwareCase& c : cases) {
    SCOPED_TRACE(c.name);
    const RegistrySnapshot snapshot = Snapshot(c.workers, {});
    DecodeQuery q;
    q.policy = PolicyKind::kPrefixAware;
    q.prompt_tokens = static_cast<int32_t>(prompt.size());
    q.prompt = prompt;
    q.model_fingerprint = "fp";
    q.ticket = c.ticket;
    q.now = kNow;
    absl::StatusOr<const WorkerState*> got = PickDecode(snapshot, q);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)->address, c.want);
  }
}

TEST(RoutingPolicyTest, PrefixAwarePrefill) {
  // Cost = uncached prompt tokens + queued prompt tokens.
  const std::vector<PrefixAwareCase> cases = {
      {.name = "no cache: fewest queued tokens",
       .workers = {W("p1").Queued(30), W("p2").Queued(10)},
       .want = "p2"},
      {.name = "a hit beats a short queue (128+100 < 256)",
       .workers = {W("p1").Keys(Held(8)).Queued(100), W("p2")},
       .want = "p1"},
      {.name = "a long queue beats a hit (128+200 > 256)",
       .workers = {W("p1").Keys(Held(8)).Queued(200), W("p2")},
       .want = "p2"},
      {.name = "equal cost: fewest waiting",
       .workers = {W("p1").Keys(Held(4)).Waiting(2), W("p2").Keys(Held(4))},
       .want = "p2"},
  };
  const WorkerState decode = Make(W("d"), v1::WORKER_ROLE_DECODE);
  const std::vector<int32_t> prompt = Prompt();
  for (const PrefixAwareCase& c : cases) {
    SCOPED_TRACE(c.name);
    const RegistrySnapshot snapshot = Snapshot({}, c.workers);
    PrefillQuery q;
    q.policy = PolicyKind::kPrefixAware;
    q.prompt = prompt;
    q.ticket = c.ticket;
    q.now = kNow;
    absl::StatusOr<const WorkerState*> got = PickPrefill(snapshot, decode, q);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)->address, c.want);
  }
}

struct DisaggregationCase {
  std::string name;
  W decode = W("d");
  std::vector<W> prefill = {W("p")};
  bool colocated = false;
  int32_t local_max = 0;
  int64_t saturation = 0;
  bool want_local = false;
  std::string want_reason;
  int32_t want_cached = 0;
};

TEST(RoutingPolicyTest, PlaceRequestCountsOnlyTheUncachedPart) {
  const std::vector<DisaggregationCase> cases = {
      {.name = "long uncached prompt: remote",
       .local_max = 64,
       .want_reason = "prefill_worker_available"},
      {.name = "mostly cached on the decode worker: local",
       .decode = W("d").Keys(Held(12)),
       .local_max = 64,
       .want_local = true,
       .want_reason = "short_uncached_prompt",
       .want_cached = 192},
      {.name = "one token more than the threshold: remote",
       .decode = W("d").Keys(Held(12)),
       .local_max = 63,
       .want_reason = "prefill_worker_available",
       .want_cached = 192},
      {.name = "fully cached still counts the last token; 0 means never",
       .decode = W("d").Keys(Held(16)),
       .local_max = 0,
       .want_reason = "prefill_worker_available",
       .want_cached = 256},
      {.name = "forced local", .colocated = true, .want_local = true, .want_reason = "forced"},
      {.name = "no prefill worker",
       .prefill = {},
       .want_local = true,
       .want_reason = "no_prefill_worker"},
      {.name = "saturated prefill tier: local",
       .prefill = {W("p1").Queued(500), W("p2").Queued(800)},
       .saturation = 500,
       .want_local = true,
       .want_reason = "prefill_saturated"},
      {.name = "one prefill worker below the threshold: remote",
       .prefill = {W("p1").Queued(500), W("p2").Queued(499)},
       .saturation = 500,
       .want_reason = "prefill_worker_available"},
      {.name = "saturation 0 never fires",
       .prefill = {W("p1").Queued(1 << 20)},
       .want_reason = "prefill_worker_available"},
      {.name = "busy but incompatible prefill workers do not count",
       .prefill = {W("p1").Queued(10), W("p2").Fp("zz").Queued(0)},
       .saturation = 5,
       .want_local = true,
       .want_reason = "prefill_saturated"},
  };
  const std::vector<int32_t> prompt = Prompt();
  for (const DisaggregationCase& c : cases) {
    SCOPED_TRACE(c.name);
    const RegistrySnapshot snapshot = Snapshot({c.decode}, c.prefill);
    PlacementQuery q;
    q.decode.prompt_tokens = static_cast<int32_t>(prompt.size());
    q.decode.prompt = q.prefill.prompt = prompt;
    q.decode.model_fingerprint = "fp";
    q.decode.now = q.prefill.now = kNow;
    q.colocated = c.colocated;
    q.local_prefill_max_tokens = c.local_max;
    q.prefill_saturation_tokens = c.saturation;
    absl::StatusOr<Placement> got = PlaceRequest(snapshot, q);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->local_prefill, c.want_local);
    EXPECT_EQ(std::string(got->reason), c.want_reason);
    EXPECT_EQ(got->decode_cached_tokens, c.want_cached);
  }
}

// Placements since a worker's last report count against it until a newer
// report arrives: a burst between two reports spreads instead of herding
// onto the worker that looked emptiest.
TEST(RoutingPolicyTest, PlacementLedgerSpreadsABurstBetweenReports) {
  RegistrySnapshot snapshot = Snapshot({W("d1").Free(100), W("d2").Free(90)}, {});
  PlacementLedger ledger;
  auto pick = [&] {
    RegistrySnapshot view = snapshot;
    ledger.Apply(&view);
    DecodeQuery q;
    q.prompt_tokens = 16;
    q.model_fingerprint = "fp";
    q.now = kNow;
    absl::StatusOr<const WorkerState*> w = PickDecode(view, q);
    EXPECT_TRUE(w.ok()) << w.status();
    const std::string address = (*w)->address;
    ledger.Record(address, (*w)->last_report, 6);
    return address;
  };
  EXPECT_EQ(pick(), "d1");  // 100 free
  EXPECT_EQ(pick(), "d1");  // 94
  EXPECT_EQ(pick(), "d2");  // 88 < 90
  EXPECT_EQ(pick(), "d1");  // 88 > 84
  RegistrySnapshot applied = snapshot;
  ledger.Apply(&applied);
  EXPECT_EQ(applied.decode[0].load.kv_blocks_free(), 82u);
  EXPECT_EQ(applied.decode[0].load.running(), 3u);
  EXPECT_EQ(applied.decode[1].load.kv_blocks_free(), 84u);
  // A newer report of d1 counts its placements itself.
  snapshot.decode[0].last_report = kNow + absl::Milliseconds(200);
  applied = snapshot;
  ledger.Apply(&applied);
  EXPECT_EQ(applied.decode[0].load.kv_blocks_free(), 100u);
  EXPECT_EQ(applied.decode[1].load.kv_blocks_free(), 84u);
}

}  // namespace
}  // namespace pdserve::router
