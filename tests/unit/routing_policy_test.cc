#include "router/routing_policy.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace pdserve {
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

  std::string address;
  uint32_t free_blocks = 100;
  uint32_t running = 0;
  uint32_t waiting = 0;
  uint64_t queued_tokens = 0;
  std::string fingerprint = "fp";
  v1::KvLayout layout = Layout();
  uint32_t protocol = 1;
  bool live = true;
  bool draining = false;
  absl::Duration age = absl::ZeroDuration();  // since the last report
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
  s.load.set_running(w.running);
  s.load.set_waiting(w.waiting);
  s.load.set_queued_prompt_tokens(w.queued_tokens);
  s.load.set_draining(w.draining);
  s.last_report = kNow - w.age;
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
       .want_message = "dtype=bf16"},
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
      {.name = "only incompatible prefill workers: error",
       .prefill = {W("p").Fp("zz")},
       .want_code = absl::StatusCode::kFailedPrecondition},
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
  }
}

}  // namespace
}  // namespace pdserve
