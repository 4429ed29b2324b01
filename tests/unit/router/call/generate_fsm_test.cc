// GenerateFsm, the router's request state machine, driven without gRPC and
// without sleeping: each case is a cluster (a snapshot the test edits), a
// request and a script of events, each with the state it must lead to and
// the actions it must produce, written as Describe() prints them:
//
//   decode(d1,remote)            start a Decode stream (,from=N,max=M after
//                                a failover; ,migrated for a migration's
//                                target)
//   prefill(p1,epoch=1)          start a Prefill call under that epoch
//   retry_transfer(d1)           start RetryTransfer on the decode worker
//   handoff#0(d2:kv)             start Handoff on decode attempt 0's worker,
//                                pushing to that KV endpoint (migration)
//   cancel_source#0 cancel_handoff#0   end a migration's source / Handoff
//   offer#0                      ask decode attempt 0's worker to offer the
//                                stream (rebalancing)
//   backoff(20ms) watchdog       arm a backoff / the watchdog
//   cancel_prefill cancel_retry cancel_decode resume
//   Started(d1,p1) Chunk(text) Finished(reason,decode,prefill,attempts=,
//                                failovers=,mode)
//   -> CODE                      the final status
//
// The clock is a FakeClock; the workers keep reporting (their last report
// is "now") unless silenced.
#include "router/call/generate_fsm.h"

#include <atomic>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/text/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/call/worker_failure.h"
#include "tests/testing/byte_tokenizer.h"

namespace pdserve::router {
namespace {

using State = GenerateFsm::State;
using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1000000);
constexpr absl::Duration kStaleAfter = absl::Seconds(1);
constexpr int32_t kEos = testing::kByteTokenizerEos;

class FakeClock : public Clock {
 public:
  absl::Time Now() const override { return now; }
  absl::Time now = kT0;
};

using testing::ByteTokenizer;

// A worker of the cluster.
struct W {
  std::string address = "";
  uint32_t free_blocks = 100;
  uint64_t queued_tokens = 0;
  std::string fingerprint = "fp";
  uint32_t total_blocks = 0;  // 0: no utilization reported
};

// The cluster as the state machine sees it. Every worker reports at the
// current time unless silenced (its last report then stays where it was).
class FakeWorkers : public GenerateFsm::Workers {
 public:
  FakeWorkers(const FakeClock* clock, std::vector<W> decode, std::vector<W> prefill)
      : clock_(clock), decode_(std::move(decode)), prefill_(std::move(prefill)) {}

  std::shared_ptr<const RegistrySnapshot> snapshot() const override {
    auto s = std::make_shared<RegistrySnapshot>();
    s->stale_after = kStaleAfter;
    for (const W& w : decode_) s->decode.push_back(Make(w, v1::WORKER_ROLE_DECODE));
    for (const W& w : prefill_) s->prefill.push_back(Make(w, v1::WORKER_ROLE_PREFILL));
    return s;
  }
  bool ReachDecode(const std::string& address) override { return !unreachable_.count(address); }
  bool ReachPrefill(const std::string& address) override { return !unreachable_.count(address); }

  void Silence(const std::string& address) { silent_since_[address] = clock_->Now(); }
  // In the snapshot, but no RPC can be started to it (left the pool).
  void MakeUnreachable(const std::string& address) { unreachable_.insert(address); }
  void Progress(const std::string& address) { ++progress_[address]; }
  void SetFree(const std::string& address, uint32_t free) {
    for (W& w : decode_) {
      if (w.address == address) w.free_blocks = free;
    }
  }

 private:
  WorkerState Make(const W& w, v1::WorkerRole role) const {
    WorkerState s;
    s.address = w.address;
    s.role = role;
    s.live = true;
    s.has_info = true;
    s.info.set_model_fingerprint(w.fingerprint);
    v1::KvLayout* l = s.info.mutable_kv_layout();
    l->set_num_layers(2);
    l->set_num_kv_heads(2);
    l->set_head_dim(16);
    l->set_block_size(16);
    l->set_dtype("f16");
    s.info.set_protocol_version(1);
    s.info.set_kv_endpoint(w.address + ":kv");
    s.load.set_kv_blocks_free(w.free_blocks);
    s.load.set_kv_blocks_total(w.total_blocks);
    s.load.set_queued_prompt_tokens(w.queued_tokens);
    auto p = progress_.find(w.address);
    s.load.set_prefill_progress(p == progress_.end() ? 0 : p->second);
    auto silent = silent_since_.find(w.address);
    s.last_report = silent == silent_since_.end() ? clock_->Now() : silent->second;
    return s;
  }

  const FakeClock* const clock_;
  std::vector<W> decode_;
  const std::vector<W> prefill_;
  std::map<std::string, absl::Time> silent_since_;
  std::map<std::string, uint64_t> progress_;
  std::set<std::string> unreachable_;
};

// ---------------------------------------------------------------------------
// Events

enum class Kind {
  kStart,
  kStartInvalid,
  kReserved,
  kTokens,
  kFinished,
  kEmptyEvent,
  kDecodeEnd,
  kPrefillDone,
  kRetryDone,
  kBackoffFires,
  kWatchdogFires,
  kCancel,
  kWriteFailed,
  kPauseReads,
  kDrained,
  kAdvance,
  kSilence,
  kProgress,
  kUnreachable,
  kMigrating,
  kHandoffDone,
  kSetFree,
};

struct Ev {
  Kind kind;
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string text = "";  // tokens, or a worker's address
  int64_t n = 0;          // first token index, epoch
  absl::Duration d = absl::ZeroDuration();
  v1::FinishReason reason = v1::FINISH_REASON_EOS;
  int attempt = -1;  // of the decode stream / prefill call; -1: the latest
};

Ev Start() { return {Kind::kStart}; }
Ev StartInvalid() { return {Kind::kStartInvalid}; }
Ev Reserved(int64_t epoch = 1) { return {.kind = Kind::kReserved, .n = epoch}; }
Ev Tokens(int64_t first, std::string text) {
  return {.kind = Kind::kTokens, .text = std::move(text), .n = first};
}
Ev Finished(v1::FinishReason reason = v1::FINISH_REASON_EOS) {
  return {.kind = Kind::kFinished, .reason = reason};
}
Ev EmptyEvent() { return {Kind::kEmptyEvent}; }
Ev DecodeEnd(grpc::StatusCode code, int attempt = -1) {
  return {.kind = Kind::kDecodeEnd, .code = code, .attempt = attempt};
}
Ev PrefillDone(grpc::StatusCode code = grpc::StatusCode::OK, int attempt = -1) {
  return {.kind = Kind::kPrefillDone, .code = code, .attempt = attempt};
}
Ev RetryDone(grpc::StatusCode code, int64_t epoch = 0) {
  return {.kind = Kind::kRetryDone, .code = code, .n = epoch};
}
// The latest backoff's alarm, or the `which`-th started in the case (from 0).
Ev BackoffFires(int which = -1) { return {.kind = Kind::kBackoffFires, .attempt = which}; }
Ev WatchdogFires() { return {Kind::kWatchdogFires}; }
Ev Cancel() { return {Kind::kCancel}; }
Ev WriteFailed() { return {Kind::kWriteFailed}; }
Ev PauseReads() { return {Kind::kPauseReads}; }
Ev Drained() { return {Kind::kDrained}; }
Ev Advance(absl::Duration d) { return {.kind = Kind::kAdvance, .d = d}; }
Ev Silence(std::string worker) { return {.kind = Kind::kSilence, .text = std::move(worker)}; }
Ev Progress(std::string worker) { return {.kind = Kind::kProgress, .text = std::move(worker)}; }
// The current decode stream offers itself after `generated` tokens.
Ev Migrating(int64_t generated) { return {.kind = Kind::kMigrating, .n = generated}; }
Ev HandoffDone(grpc::StatusCode code) { return {.kind = Kind::kHandoffDone, .code = code}; }
// A decode worker's next reports show `free` free blocks.
Ev SetFree(std::string worker, int64_t free) {
  return {.kind = Kind::kSetFree, .text = std::move(worker), .n = free};
}
Ev Unreachable(std::string worker) {
  return {.kind = Kind::kUnreachable, .text = std::move(worker)};
}

constexpr grpc::StatusCode OK = grpc::StatusCode::OK;
constexpr grpc::StatusCode UNAVAILABLE = grpc::StatusCode::UNAVAILABLE;
constexpr grpc::StatusCode RESOURCE_EXHAUSTED = grpc::StatusCode::RESOURCE_EXHAUSTED;
constexpr grpc::StatusCode DEADLINE_EXCEEDED = grpc::StatusCode::DEADLINE_EXCEEDED;
constexpr grpc::StatusCode INVALID_ARGUMENT = grpc::StatusCode::INVALID_ARGUMENT;
constexpr grpc::StatusCode NOT_FOUND = grpc::StatusCode::NOT_FOUND;
constexpr grpc::StatusCode CANCELLED = grpc::StatusCode::CANCELLED;
constexpr grpc::StatusCode UNAUTHENTICATED = grpc::StatusCode::UNAUTHENTICATED;

// ---------------------------------------------------------------------------
// Actions, as one line

std::string ReasonName(v1::FinishReason reason) {
  std::string name = v1::FinishReason_Name(reason);
  const std::string prefix = "FINISH_REASON_";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

std::string Describe(const GenerateFsm::Actions& a) {
  std::vector<std::string> parts;
  if (a.start_decode.has_value()) {
    const v1::DecodeRequest& r = a.start_decode->request;
    std::string s =
        absl::StrCat("decode(", a.start_decode->address, r.local_prefill() ? ",local" : ",remote",
                     r.migrated() ? ",migrated" : "");
    if (r.first_index() > 0) {
      absl::StrAppend(&s, ",from=", r.first_index(), ",max=", r.max_tokens());
    }
    parts.push_back(s + ")");
  }
  if (a.start_prefill.has_value()) {
    parts.push_back(absl::StrCat("prefill(", a.start_prefill->address,
                                 ",epoch=", a.start_prefill->request.target().epoch(), ")"));
  }
  if (a.start_transfer_retry.has_value()) {
    parts.push_back(absl::StrCat("retry_transfer(", a.start_transfer_retry->address, ")"));
  }
  if (a.start_handoff.has_value()) {
    EXPECT_EQ(a.start_handoff->request.offer_id(), 42u) << "the offer's id, echoed";
    parts.push_back(absl::StrCat("handoff#", a.start_handoff->source, "(",
                                 a.start_handoff->request.target().kv_endpoint(), ")"));
  }
  if (a.start_backoff.has_value()) {
    parts.push_back(absl::StrCat("backoff(", absl::FormatDuration(a.start_backoff->delay), ")"));
  }
  // Timers with their delay and cancels with the attempt they target, so a
  // table row pins both (the abandoned stream, not the new one).
  if (a.arm_watchdog.has_value()) {
    parts.push_back(absl::StrCat("watchdog(", absl::FormatDuration(*a.arm_watchdog), ")"));
  }
  if (a.cancel_prefill.has_value()) {
    parts.push_back(absl::StrCat("cancel_prefill#", *a.cancel_prefill));
  }
  if (a.cancel_transfer_retry.has_value()) {
    parts.push_back(absl::StrCat("cancel_retry#", *a.cancel_transfer_retry));
  }
  if (a.cancel_decode.has_value()) {
    parts.push_back(absl::StrCat("cancel_decode#", *a.cancel_decode));
  }
  if (a.cancel_source.has_value()) parts.push_back(absl::StrCat("cancel_source#", *a.cancel_source));
  if (a.cancel_handoff.has_value()) {
    parts.push_back(absl::StrCat("cancel_handoff#", *a.cancel_handoff));
  }
  if (a.resume_decode.has_value()) parts.push_back(absl::StrCat("resume#", *a.resume_decode));
  if (a.offer_migration.has_value()) {
    parts.push_back(absl::StrCat("offer#", *a.offer_migration));
  }
  for (const v1::GenerateResponse& r : a.responses) {
    if (r.has_started()) {
      parts.push_back(absl::StrCat("Started(", r.started().decode_worker(), ",",
                                   r.started().prefill_worker(), ")"));
    } else if (r.has_chunk()) {
      parts.push_back(absl::StrCat("Chunk(", r.chunk().text(), ")"));
    } else if (r.has_finished()) {
      const v1::Finished& f = r.finished();
      const v1::Placement& p = f.placement();
      parts.push_back(absl::StrCat("Finished(", ReasonName(f.reason()), ",", p.decode_worker(),
                                   ",", p.prefill_worker(), ",attempts=", p.prefill_attempts(),
                                   ",failovers=", p.decode_failovers(), ",",
                                   f.timings().prefill_mode(),
                                   p.decode_migrations() > 0
                                       ? absl::StrCat(",migrations=", p.decode_migrations())
                                       : "",
                                   ")"));
    }
  }
  if (a.outcome.has_value()) parts.push_back("-> " + StatusCodeName(a.outcome->error_code()));
  return absl::StrJoin(parts, " ");
}

// ---------------------------------------------------------------------------
// The table

struct Step {
  Ev ev;
  State state;
  std::string actions;
  std::string message = "";  // in the final status's message, if set
};

struct Case {
  std::string name = "";
  std::vector<W> decode = {{"d1", 100}, {"d2", 50}};  // least_loaded: d1 first
  std::vector<W> prefill = {{"p1"}, {"p2", 100, 1000}};  // p1 first
  void (*configure)(RouterConfig*) = nullptr;
  int32_t max_tokens = 16;
  std::vector<std::string> stop = {};
  absl::Duration deadline = absl::Seconds(120);
  std::vector<Step> steps = {};
};

const std::vector<W> kOneDecode = {{"d1", 100}};
const std::vector<W> kNoPrefill = {};
const std::vector<W> kOnePrefill = {{"p1"}};

std::vector<Case> Cases() {
  constexpr State kPlacing = State::kPlacing;
  constexpr State kDecodeOpen = State::kDecodeOpen;
  constexpr State kPrefilling = State::kPrefilling;
  constexpr State kStreaming = State::kStreaming;
  constexpr State kCompleting = State::kCompleting;
  constexpr State kDone = State::kDone;
  const absl::Duration ms = absl::Milliseconds(1);
  std::vector<Case> cases;

  // --- Admission and placement -------------------------------------------
  cases.push_back({.name = "InvalidRequestEndsAtOnce",
                   .steps = {{StartInvalid(), kDone, "-> INVALID_ARGUMENT", "no input"}}});
  cases.push_back({.name = "NoDecodeWorkerIsUnavailable",
                   .decode = {},
                   .steps = {{Start(), kDone, "-> UNAVAILABLE", "no live decode worker"}}});
  // No prefill worker pairs with any decode worker (one tier rolled over
  // before the other): the decode worker prefills instead of the request
  // failing.
  cases.push_back({.name = "IncompatiblePrefillWorkersMeanLocalPrefill",
                   .prefill = {{"p1", 100, 0, "other"}},
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "hi"), kStreaming, "Started(d1,) Chunk(hi)"}}});
  cases.push_back({.name = "ADecodeWorkerThatLeftThePoolIsSkipped",
                   .steps = {{Unreachable("d1"), State::kAdmitted, ""},
                             {Start(), kDecodeOpen, "decode(d2,remote) watchdog(468.75ms)"}}});

  // --- Happy paths -------------------------------------------------------
  cases.push_back({.name = "RemotePrefill",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(), kPrefilling, ""},
                             {Tokens(0, "hi"), kStreaming, "Chunk(hi)"},
                             {Finished(), kDone,
                              "Finished(EOS,d1,p1,attempts=1,failovers=0,remote) -> OK"}}});
  cases.push_back({.name = "DecodeDoneWaitsForThePrefillCall",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {Tokens(0, "hi"), kStreaming, "Chunk(hi)"},
                             {Finished(), kCompleting, ""},
                             {PrefillDone(), kDone,
                              "Finished(EOS,d1,p1,attempts=1,failovers=0,remote) -> OK"}}});
  cases.push_back({.name = "LocalPrefillWithoutAPrefillTier",
                   .prefill = kNoPrefill,
                   .max_tokens = 2,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "ab"), kStreaming, "Started(d1,) Chunk(ab)"},
                             {Finished(v1::FINISH_REASON_LENGTH), kDone,
                              "Finished(LENGTH,d1,,attempts=0,failovers=0,local) -> OK"},
                             {DecodeEnd(OK), kDone, ""}}});
  cases.push_back({.name = "StopStringEndsTheStreamAndCancelsDecode",
                   .prefill = kNoPrefill,
                   .stop = {"."},
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "onetwo.more"), kDone,
                              "cancel_decode#0 Started(d1,) Chunk(onetwo) "
                              "Finished(STOP,d1,,attempts=0,failovers=0,local) -> OK"},
                             {DecodeEnd(CANCELLED), kDone, ""}}});

  // --- Protocol violations -----------------------------------------------
  cases.push_back({.name = "TokensBeforeReservedAreAProtocolError",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Tokens(0, "a"), kDone, "cancel_decode#0 -> INTERNAL",
                              "sent output before reserving KV"}}});
  cases.push_back({.name = "ReservedTwiceIsAProtocolError",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {Reserved(), kDone, "cancel_prefill#0 cancel_decode#0 -> INTERNAL",
                              "reserved twice"}}});
  cases.push_back({.name = "AnEmptyEventIsAProtocolError",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {EmptyEvent(), kDone, "cancel_decode#0 -> INTERNAL",
                              "sent an empty event"}}});
  cases.push_back({.name = "AStreamEndingWithoutDecodeFinishedIsAProtocolError",
                   .prefill = kNoPrefill,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "a"), kStreaming, "Started(d1,) Chunk(a)"},
                             {DecodeEnd(OK), kDone, "-> INTERNAL",
                              "ended the stream without DecodeFinished"}}});

  // --- Decode refusals before any event ------------------------------------
  cases.push_back({.name = "ARefusedDecodeIsPlacedOnAnotherWorker",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {DecodeEnd(RESOURCE_EXHAUSTED), kDecodeOpen, "decode(d2,remote)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d2,p1)"}}});
  cases.push_back({.name = "ARefusedLocalDecodeCompletesOnAnotherWorker",
                   .prefill = kNoPrefill,
                   .max_tokens = 2,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {DecodeEnd(RESOURCE_EXHAUSTED), kDecodeOpen, "decode(d2,local)"},
                             {Tokens(0, "ab"), kStreaming, "Started(d2,) Chunk(ab)"},
                             {Finished(v1::FINISH_REASON_LENGTH), kDone,
                              "Finished(LENGTH,d2,,attempts=0,failovers=0,local) -> OK"}}});
  cases.push_back({.name = "EveryDecodeRefusingIsResourceExhausted",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {DecodeEnd(RESOURCE_EXHAUSTED), kDecodeOpen, "decode(d2,remote)"},
                             {DecodeEnd(RESOURCE_EXHAUSTED), kDone, "-> RESOURCE_EXHAUSTED",
                              "no decode worker could take the request (d1: RESOURCE_EXHAUSTED: "
                              "broke; d2: RESOURCE_EXHAUSTED: broke)"}}});
  cases.push_back({.name = "AnUnreachableDecodeIsPlacedOnAnotherWorker",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {DecodeEnd(UNAVAILABLE), kDecodeOpen, "decode(d2,remote)"}}});

  // --- Prefill attempts ----------------------------------------------------
  cases.push_back({.name = "FailedPrefillIsRetriedOnAnotherWorkerUnderANewEpoch",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(UNAVAILABLE), kPrefilling, "backoff(20ms)"},
                             {BackoffFires(), kPrefilling, "retry_transfer(d1)"},
                             {RetryDone(OK, 2), kPrefilling, "prefill(p2,epoch=2)"},
                             {PrefillDone(), kPrefilling, ""},
                             {Tokens(0, "hi"), kStreaming, "Chunk(hi)"},
                             {Finished(), kDone,
                              "Finished(EOS,d1,p2,attempts=2,failovers=0,remote) -> OK"}}});
  cases.push_back({.name = "FailedPrefillWithoutRetriesFailsAndReleasesTheReservation",
                   .configure = [](RouterConfig* c) { c->prefill_retries = 0; },
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(UNAVAILABLE), kDone, "cancel_decode#0 -> UNAVAILABLE",
                              "prefill worker p1"}}});
  cases.push_back({.name = "APrefillVerdictOnTheRequestIsNotRetried",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(INVALID_ARGUMENT), kDone,
                              "cancel_decode#0 -> INVALID_ARGUMENT", "prefill worker p1"}}});
  cases.push_back({.name = "PrefillRetryBudgetUsedUpFails",
                   .configure = [](RouterConfig* c) { c->prefill_retries = 1; },
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(UNAVAILABLE), kPrefilling, "backoff(20ms)"},
                             {BackoffFires(), kPrefilling, "retry_transfer(d1)"},
                             {RetryDone(OK, 2), kPrefilling, "prefill(p2,epoch=2)"},
                             {PrefillDone(UNAVAILABLE), kDone, "cancel_decode#0 -> UNAVAILABLE",
                              "(after 1 prefill retries)"}}});
  cases.push_back({.name = "BackoffDoublesWithEachRetry",
                   .prefill = {{"p1"}, {"p2", 100, 1000}, {"p3", 100, 2000}},
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(UNAVAILABLE), kPrefilling, "backoff(20ms)"},
                             {BackoffFires(), kPrefilling, "retry_transfer(d1)"},
                             {RetryDone(OK, 2), kPrefilling, "prefill(p2,epoch=2)"},
                             {PrefillDone(UNAVAILABLE), kPrefilling, "backoff(40ms)"},
                             {BackoffFires(), kPrefilling, "retry_transfer(d1)"},
                             {RetryDone(OK, 3), kPrefilling, "prefill(p3,epoch=3)"}}});
  cases.push_back({.name = "NoPrefillWorkerLeftForARetryFallsBackToLocalPrefill",
                   .prefill = kOnePrefill,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(UNAVAILABLE), kPrefilling, "backoff(20ms)"},
                             {BackoffFires(), kPrefilling, "retry_transfer(d1)"},
                             {RetryDone(OK, 2), kDecodeOpen, "decode(d1,local) cancel_decode#0"},
                             {DecodeEnd(CANCELLED, 0), kDecodeOpen, ""},
                             {Tokens(0, "hi"), kStreaming, "Chunk(hi)"},
                             {Finished(), kDone,
                              "Finished(EOS,d1,,attempts=1,failovers=0,local) -> OK"}}});
  // A KV secret the pair does not share: another prefill worker, or in the
  // end local prefill, still serves the request.
  cases.push_back({.name = "AnUnauthenticatedPrefillFallsBackToLocalPrefill",
                   .prefill = kOnePrefill,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(UNAUTHENTICATED), kPrefilling, "backoff(20ms)"},
                             {BackoffFires(), kPrefilling, "retry_transfer(d1)"},
                             {RetryDone(OK, 2), kDecodeOpen, "decode(d1,local) cancel_decode#0"},
                             {Tokens(0, "hi"), kStreaming, "Chunk(hi)"},
                             {Finished(), kDone,
                              "Finished(EOS,d1,,attempts=1,failovers=0,local) -> OK"}}});
  cases.push_back({.name = "BusyPrefillWorkersWithRetriesUsedUpFallBackToLocalPrefill",
                   .configure = [](RouterConfig* c) { c->prefill_retries = 0; },
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(RESOURCE_EXHAUSTED), kDecodeOpen,
                              "decode(d1,local) cancel_decode#0"}}});
  // The decode worker frees a given-up reservation between engine steps; a
  // busy worker (seconds-long prefill chunks) refuses the local attempt
  // only after the first release window, before the blocks are back. The
  // request polls that worker for one more window, and fails only if it
  // still refuses after it.
  cases.push_back({.name = "ALateRefusalForBlocksWaitsOneMoreWindowForItsOwn",
                   .decode = kOneDecode,
                   .configure = [](RouterConfig* c) { c->prefill_retries = 0; },
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(RESOURCE_EXHAUSTED), kDecodeOpen,
                              "decode(d1,local) cancel_decode#0"},
                             {Advance(6700 * ms), kDecodeOpen, ""},
                             {DecodeEnd(RESOURCE_EXHAUSTED), kPlacing, "backoff(200ms)"},
                             {BackoffFires(), kDecodeOpen, "decode(d1,local)"},
                             {Tokens(0, "hi"), kStreaming, "Chunk(hi)"},
                             {Finished(), kDone,
                              "Finished(EOS,d1,,attempts=1,failovers=0,local) -> OK"}}});
  cases.push_back({.name = "ARefusalForBlocksAfterTheExtraWindowFails",
                   .decode = kOneDecode,
                   .configure = [](RouterConfig* c) { c->prefill_retries = 0; },
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(RESOURCE_EXHAUSTED), kDecodeOpen,
                              "decode(d1,local) cancel_decode#0"},
                             {Advance(6700 * ms), kDecodeOpen, ""},
                             {DecodeEnd(RESOURCE_EXHAUSTED), kPlacing, "backoff(200ms)"},
                             {Advance(3000 * ms), kPlacing, ""},
                             {BackoffFires(), kDecodeOpen, "decode(d1,local)"},
                             {DecodeEnd(RESOURCE_EXHAUSTED), kDone, "-> RESOURCE_EXHAUSTED",
                              "no decode worker could take the request"}}});
  cases.push_back({.name = "AFailedRetryTransferLeavesItToTheDecodeStream",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(UNAVAILABLE), kPrefilling, "backoff(20ms)"},
                             {BackoffFires(), kPrefilling, "retry_transfer(d1)"},
                             {RetryDone(NOT_FOUND), kPrefilling, ""},
                             {Tokens(0, "hi"), kStreaming, "Chunk(hi)"},
                             {Finished(), kDone,
                              "Finished(EOS,d1,p1,attempts=1,failovers=0,remote) -> OK"}}});
  cases.push_back({.name = "ADecodeWorkerGoneDuringAPrefillRetryIsUnavailable",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(UNAVAILABLE), kPrefilling, "backoff(20ms)"},
                             {Unreachable("d1"), kPrefilling, ""},
                             {BackoffFires(), kDone, "cancel_decode#0 -> UNAVAILABLE",
                              "left the worker pool during a prefill retry"}}});
  cases.push_back({.name = "PrefillFailingAfterItsKvCommittedStillCompletes",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {Tokens(0, "hi"), kStreaming, "Chunk(hi)"},
                             {PrefillDone(UNAVAILABLE), kStreaming, ""},
                             {Finished(), kDone,
                              "Finished(EOS,d1,p1,attempts=1,failovers=0,remote) -> OK"}}});
  cases.push_back({.name = "TokensEndAPendingTransferRetry",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(UNAVAILABLE), kPrefilling, "backoff(20ms)"},
                             {Tokens(0, "hi"), kStreaming, "Chunk(hi)"},
                             // The KV is in: no RetryTransfer for a committed reservation.
                             {BackoffFires(), kStreaming, ""},
                             {Finished(), kDone,
                              "Finished(EOS,d1,p1,attempts=1,failovers=0,remote) -> OK"}}});
  cases.push_back({.name = "AStaleBackoffAlarmDoesNotPlaceEarly",
                   .decode = kOneDecode,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(UNAVAILABLE), kPrefilling, "backoff(20ms)"},
                             {DecodeEnd(UNAVAILABLE), kPlacing, "backoff(200ms)"},
                             {Advance(20 * ms), kPlacing, ""},
                             // The transfer retry's alarm, superseded by the placement poll.
                             {BackoffFires(0), kPlacing, ""},
                             {Advance(180 * ms), kPlacing, ""},
                             {BackoffFires(), kDecodeOpen, "decode(d1,remote)"}}});
  cases.push_back({.name = "PrefillFailingWhileCompletingStillCompletes",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {Tokens(0, "hi"), kStreaming, "Chunk(hi)"},
                             {Finished(), kCompleting, ""},
                             {PrefillDone(UNAVAILABLE), kDone,
                              "Finished(EOS,d1,p1,attempts=1,failovers=0,remote) -> OK"}}});
  cases.push_back({.name = "AnExpiredKvWaitFallsBackToLocalPrefill",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {DecodeEnd(DEADLINE_EXCEEDED), kDecodeOpen,
                              "decode(d1,local) cancel_prefill#0"},
                             {Tokens(0, "x"), kStreaming, "Chunk(x)"},
                             {Finished(), kDone,
                              "Finished(EOS,d1,,attempts=1,failovers=0,local) -> OK"}}});
  cases.push_back({.name = "CallbacksOfASupersededPlacementAreIgnored",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(UNAVAILABLE), kPrefilling, "backoff(20ms)"},
                             {DecodeEnd(UNAVAILABLE), kDecodeOpen, "decode(d2,remote)"},
                             {BackoffFires(), kDecodeOpen, ""},
                             {PrefillDone(OK, 0), kDecodeOpen, ""}}});

  // --- Decode failover -----------------------------------------------------
  cases.push_back({.name = "DecodeDyingMidStreamFailsOverFromTheRelayedTokens",
                   .prefill = kNoPrefill,
                   .max_tokens = 6,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "abc"), kStreaming, "Started(d1,) Chunk(abc)"},
                             {DecodeEnd(UNAVAILABLE), kDecodeOpen,
                              "decode(d2,local,from=3,max=3)"},
                             {Tokens(3, "def"), kStreaming, "Chunk(def)"},
                             {Finished(v1::FINISH_REASON_LENGTH), kDone,
                              "Finished(LENGTH,d2,,attempts=0,failovers=1,local) -> OK"}}});
  cases.push_back({.name = "AFailoverBeforeTheFirstTokenPrefillsAgain",
                   .prefill = kOnePrefill,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {DecodeEnd(UNAVAILABLE), kDecodeOpen,
                              "decode(d2,remote) cancel_prefill#0"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1)"},
                             {PrefillDone(), kPrefilling, ""},
                             {Tokens(0, "hi"), kStreaming, "Chunk(hi)"},
                             {Finished(), kDone,
                              "Finished(EOS,d2,p1,attempts=2,failovers=1,remote) -> OK"}}});
  cases.push_back({.name = "DecodeFailoverBudgetUsedUpIsUnavailable",
                   .prefill = kNoPrefill,
                   .configure = [](RouterConfig* c) { c->decode_failovers = 0; },
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "ab"), kStreaming, "Started(d1,) Chunk(ab)"},
                             {DecodeEnd(UNAVAILABLE), kDone, "-> UNAVAILABLE",
                              "(decode failover budget of 0 used up)"}}});
  cases.push_back({.name = "ALostDecodeFinishedCompletesOnTheTokens",
                   .prefill = kNoPrefill,
                   .max_tokens = 3,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "abc"), kStreaming, "Started(d1,) Chunk(abc)"},
                             {DecodeEnd(UNAVAILABLE), kDone,
                              "Finished(LENGTH,d1,,attempts=0,failovers=0,local) -> OK"}}});
  cases.push_back({.name = "FailoverWaitsForADecodeWorkerToComeBack",
                   .decode = kOneDecode,
                   .prefill = kNoPrefill,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "abc"), kStreaming, "Started(d1,) Chunk(abc)"},
                             {DecodeEnd(UNAVAILABLE), kPlacing, "backoff(200ms)"},
                             {Advance(200 * ms), kPlacing, ""},
                             {BackoffFires(), kDecodeOpen, "decode(d1,local,from=3,max=13)"}}});
  cases.push_back({.name = "FailoverWaitEndsWithThePlacementError",
                   .decode = kOneDecode,
                   .prefill = kNoPrefill,
                   .configure = [](RouterConfig* c) { c->failover_wait_ms = 300; },
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "abc"), kStreaming, "Started(d1,) Chunk(abc)"},
                             {Silence("d1"), kStreaming, ""},
                             {Advance(1200 * ms), kStreaming, ""},
                             {DecodeEnd(UNAVAILABLE), kPlacing, "backoff(200ms)"},
                             {Advance(200 * ms), kPlacing, ""},
                             {BackoffFires(), kDone, "-> UNAVAILABLE",
                              "no decode worker could take the request"}}});

  // --- Watchdog --------------------------------------------------------------
  cases.push_back({.name = "AHungDecodeWorkerFailsOver",
                   .prefill = kNoPrefill,
                   .max_tokens = 6,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "abc"), kStreaming, "Started(d1,) Chunk(abc)"},
                             {Silence("d1"), kStreaming, ""},
                             {Advance(1200 * ms), kStreaming, ""},
                             {WatchdogFires(), kDecodeOpen,
                              "decode(d2,local,from=3,max=3) watchdog(1s) cancel_decode#0"},
                             {DecodeEnd(CANCELLED, 0), kDecodeOpen, ""}}});
  cases.push_back({.name = "AHungOnlyDecodeWorkerCostsOneFailover",
                   .decode = kOneDecode,
                   .prefill = kNoPrefill,
                   .configure =
                       [](RouterConfig* c) {
                         c->decode_failovers = 1;
                         c->failover_wait_ms = 300;
                       },
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "abc"), kStreaming, "Started(d1,) Chunk(abc)"},
                             {Silence("d1"), kStreaming, ""},
                             {Advance(1200 * ms), kStreaming, ""},
                             {WatchdogFires(), kPlacing, "backoff(200ms) cancel_decode#0"},
                             // The abandoned stream's late end is no second failover.
                             {DecodeEnd(CANCELLED, 0), kPlacing, ""},
                             {Advance(200 * ms), kPlacing, ""},
                             {BackoffFires(), kDone, "-> UNAVAILABLE",
                              "no decode worker could take the request"}}});
  cases.push_back({.name = "ASlowButLiveDecodeWorkerIsNotAbandoned",
                   .prefill = kNoPrefill,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "a"), kStreaming, "Started(d1,) Chunk(a)"},
                             {Advance(1200 * ms), kStreaming, ""},
                             {WatchdogFires(), kStreaming, "watchdog(1s)"},
                             {Tokens(1, "b"), kStreaming, "Chunk(b)"},
                             {Finished(v1::FINISH_REASON_LENGTH), kDone,
                              "Finished(LENGTH,d1,,attempts=0,failovers=0,local) -> OK"}}});
  cases.push_back({.name = "ALateWatchdogJudgesNoSilence",
                   .prefill = kNoPrefill,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "a"), kStreaming, "Started(d1,) Chunk(a)"},
                             {Silence("d1"), kStreaming, ""},
                             {Advance(absl::Seconds(5)), kStreaming, ""},
                             {WatchdogFires(), kStreaming, "watchdog(1s)"}}});
  cases.push_back({.name = "PausedReadsAreNotTheWorkersSilence",
                   .prefill = kNoPrefill,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "a"), kStreaming, "Started(d1,) Chunk(a)"},
                             {PauseReads(), kStreaming, ""},
                             {Silence("d1"), kStreaming, ""},
                             {Advance(1200 * ms), kStreaming, ""},
                             {WatchdogFires(), kStreaming, "watchdog(1s)"},
                             {Drained(), kStreaming, "resume#0"},
                             {Drained(), kStreaming, ""}}});
  cases.push_back({.name = "ASilentPrefillWorkerIsRetriedElsewhere",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {Silence("p1"), kPrefilling, ""},
                             {Advance(900 * ms), kPrefilling, ""},
                             {WatchdogFires(), kPrefilling, "watchdog(468.75ms)"},
                             {Advance(400 * ms), kPrefilling, ""},
                             {WatchdogFires(), kPrefilling,
                              "backoff(20ms) watchdog(468.75ms) cancel_prefill#0"},
                             {BackoffFires(), kPrefilling, "retry_transfer(d1)"},
                             {RetryDone(OK, 2), kPrefilling, "prefill(p2,epoch=2)"}}});
  cases.push_back({.name = "ASilentPrefillWorkerWithoutRetriesIsUnavailable",
                   .prefill = kOnePrefill,
                   .configure = [](RouterConfig* c) { c->prefill_retries = 0; },
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {Silence("p1"), kPrefilling, ""},
                             {Advance(900 * ms), kPrefilling, ""},
                             {WatchdogFires(), kPrefilling, "watchdog(468.75ms)"},
                             {Advance(400 * ms), kPrefilling, ""},
                             {WatchdogFires(), kDone,
                              "cancel_prefill#0 cancel_decode#0 -> UNAVAILABLE",
                              "went silent"}}});
  cases.push_back({.name = "AStalledPrefillIsGivenUpOnAndRetried",
                   .configure = [](RouterConfig* c) { c->prefill_attempt_timeout_ms = 300; },
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(50ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {Advance(350 * ms), kPrefilling, ""},
                             {WatchdogFires(), kPrefilling,
                              "backoff(20ms) watchdog(50ms) cancel_prefill#0"},
                             {BackoffFires(), kPrefilling, "retry_transfer(d1)"},
                             {RetryDone(OK, 2), kPrefilling, "prefill(p2,epoch=2)"}}});
  cases.push_back({.name = "AStalledPrefillWithoutRetriesIsDeadlineExceeded",
                   .configure = [](RouterConfig* c) {
                     c->prefill_attempt_timeout_ms = 300;
                     c->prefill_retries = 0;
                   },
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(50ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {Advance(350 * ms), kPrefilling, ""},
                             {WatchdogFires(), kDone,
                              "cancel_prefill#0 cancel_decode#0 -> DEADLINE_EXCEEDED",
                              "prefill worker p1 computed no prompt token"}}});
  cases.push_back({.name = "APrefillThatKeepsComputingIsNotTimedOut",
                   .configure = [](RouterConfig* c) { c->prefill_attempt_timeout_ms = 300; },
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(50ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {Advance(200 * ms), kPrefilling, ""},
                             {Progress("p1"), kPrefilling, ""},
                             {WatchdogFires(), kPrefilling, "watchdog(50ms)"},
                             {Advance(200 * ms), kPrefilling, ""},
                             {WatchdogFires(), kPrefilling, "watchdog(50ms)"},
                             {Advance(200 * ms), kPrefilling, ""},
                             {Progress("p1"), kPrefilling, ""},
                             {WatchdogFires(), kPrefilling, "watchdog(50ms)"}}});

  // --- The client and the deadline -----------------------------------------
  cases.push_back({.name = "ClientCancelDuringPrefillReachesBothTiers",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {Cancel(), kDone, "cancel_prefill#0 cancel_decode#0 -> CANCELLED"},
                             {PrefillDone(CANCELLED), kDone, ""},
                             {DecodeEnd(CANCELLED), kDone, ""}}});
  cases.push_back({.name = "ClientCancelDuringARetryStopsItsRpcs",
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {PrefillDone(UNAVAILABLE), kPrefilling, "backoff(20ms)"},
                             {BackoffFires(), kPrefilling, "retry_transfer(d1)"},
                             {Cancel(), kDone, "cancel_retry#0 cancel_decode#0 -> CANCELLED"},
                             {RetryDone(OK, 2), kDone, ""}}});
  cases.push_back({.name = "ACancelAtTheClientsDeadlineIsTheDeadline",
                   .deadline = absl::Seconds(1),
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Advance(980 * ms), kDecodeOpen, ""},
                             {Cancel(), kDone, "cancel_decode#0 -> DEADLINE_EXCEEDED",
                              "client deadline exceeded"}}});
  cases.push_back({.name = "AFailedWriteIsAGoneClient",
                   .prefill = kNoPrefill,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "a"), kStreaming, "Started(d1,) Chunk(a)"},
                             {WriteFailed(), kDone, "cancel_decode#0 -> CANCELLED",
                              "client stream closed"}}});
  cases.push_back({.name = "TheRequestDeadlineIsReportedAsSuch",
                   .deadline = absl::Seconds(1),
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {Advance(absl::Seconds(1)), kPrefilling, ""},
                             {DecodeEnd(DEADLINE_EXCEEDED), kDone,
                              "cancel_prefill#0 -> DEADLINE_EXCEEDED",
                              "waiting for decode worker d1 (0 tokens generated)"}}});
  cases.push_back({.name = "NothingIsRetriedPastTheDeadline",
                   .deadline = absl::Seconds(1),
                   .steps = {{Start(), kDecodeOpen, "decode(d1,remote) watchdog(468.75ms)"},
                             {Reserved(), kPrefilling, "prefill(p1,epoch=1) Started(d1,p1)"},
                             {Advance(absl::Seconds(1)), kPrefilling, ""},
                             {PrefillDone(UNAVAILABLE), kDone, "cancel_decode#0 -> UNAVAILABLE",
                              "prefill worker p1"}}});

  // --- KV migration (a draining decode worker offers its streams) ---------
  // The target gets the KV of every token but the last, which the source's
  // commit carries: it re-emits that one (index 2), which the client has.
  cases.push_back({.name = "ADrainingWorkersStreamMovesWithItsKv",
                   .prefill = kNoPrefill,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "abc"), kStreaming, "Started(d1,) Chunk(abc)"},
                             {Migrating(3), kDecodeOpen, "decode(d2,remote,migrated,from=2,max=14)"},
                             {Reserved(), kPrefilling, "handoff#0(d2:kv)"},
                             {HandoffDone(OK), kPrefilling, ""},
                             {Tokens(2, "cde"), kStreaming, "cancel_source#0 Chunk(de)"},
                             {DecodeEnd(grpc::StatusCode::ABORTED, 0), kStreaming, ""},
                             {Finished(), kDone,
                              "Finished(EOS,d2,,attempts=0,failovers=0,local,migrations=1) -> OK"}}});
  cases.push_back({.name = "AFailedHandoffRecomputesTheStream",
                   .prefill = kNoPrefill,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "abc"), kStreaming, "Started(d1,) Chunk(abc)"},
                             {Migrating(3), kDecodeOpen, "decode(d2,remote,migrated,from=2,max=14)"},
                             {Reserved(), kPrefilling, "handoff#0(d2:kv)"},
                             {HandoffDone(NOT_FOUND), kDecodeOpen,
                              "decode(d2,local,from=3,max=13) cancel_decode#1 cancel_source#0"},
                             {Tokens(3, "d"), kStreaming, "Chunk(d)"},
                             {Finished(), kDone,
                              "Finished(EOS,d2,,attempts=0,failovers=1,local) -> OK"}}});
  cases.push_back({.name = "AMigrationTargetThatDiesIsRecomputedElsewhere",
                   .decode = {{"d1", 100}, {"d2", 50}, {"d3", 10}},
                   .prefill = kNoPrefill,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "abc"), kStreaming, "Started(d1,) Chunk(abc)"},
                             {Migrating(3), kDecodeOpen, "decode(d2,remote,migrated,from=2,max=14)"},
                             {Reserved(), kPrefilling, "handoff#0(d2:kv)"},
                             {DecodeEnd(UNAVAILABLE), kDecodeOpen,
                              "decode(d3,local,from=3,max=13) cancel_source#0 cancel_handoff#0"},
                             {HandoffDone(UNAVAILABLE), kDecodeOpen, ""}}});
  cases.push_back({.name = "NoMigrationTargetMeansARecomputeThatWaits",
                   .decode = kOneDecode,
                   .prefill = kNoPrefill,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "ab"), kStreaming, "Started(d1,) Chunk(ab)"},
                             {Migrating(2), kPlacing, "backoff(200ms) cancel_source#0"}}});
  cases.push_back({.name = "AMismatchedOfferIsLeftToLapse",
                   .prefill = kNoPrefill,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "ab"), kStreaming, "Started(d1,) Chunk(ab)"},
                             {Migrating(5), kStreaming, ""},
                             {DecodeEnd(UNAVAILABLE), kDecodeOpen,
                              "decode(d2,local,from=2,max=14)"}}});
  cases.push_back({.name = "WithMigrationOffTheOfferIsLeftToLapse",
                   .prefill = kNoPrefill,
                   .configure = [](RouterConfig* c) { c->decode_migration = false; },
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "ab"), kStreaming, "Started(d1,) Chunk(ab)"},
                             {Migrating(2), kStreaming, ""}}});
  cases.push_back({.name = "ClientCancelDuringAMigrationEndsBothStreams",
                   .prefill = kNoPrefill,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {Tokens(0, "abc"), kStreaming, "Started(d1,) Chunk(abc)"},
                             {Migrating(3), kDecodeOpen, "decode(d2,remote,migrated,from=2,max=14)"},
                             {Reserved(), kPrefilling, "handoff#0(d2:kv)"},
                             {Cancel(), kDone,
                              "cancel_decode#1 cancel_source#0 cancel_handoff#0 -> CANCELLED"}}});

  // --- Rebalancing (--rebalance_kv_utilization) ----------------------------
  // d1 fills up after the stream started; d2 has room: the stream is asked
  // to move (once), and moves as in a drain.
  const std::vector<W> kTwoPools = {{"d1", 60, 0, "fp", 100}, {"d2", 50, 0, "fp", 100}};
  cases.push_back({.name = "AStreamOnAFullWorkerMovesToOneWithRoom",
                   .decode = kTwoPools,
                   .prefill = kNoPrefill,
                   .configure = [](RouterConfig* c) { c->rebalance_kv_utilization = 0.9; },
                   .max_tokens = 100,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {SetFree("d1", 5), kDecodeOpen, ""},
                             {Tokens(0, "ab"), kStreaming, "offer#0 Started(d1,) Chunk(ab)"},
                             {Tokens(2, "c"), kStreaming, "Chunk(c)"},
                             {Migrating(3), kDecodeOpen, "decode(d2,remote,migrated,from=2,max=98)"},
                             {Reserved(), kPrefilling, "handoff#0(d2:kv)"},
                             {Tokens(2, "cd"), kStreaming, "cancel_source#0 Chunk(d)"}}});
  cases.push_back({.name = "NoMoveWhenNoOtherWorkerHasRoom",
                   .decode = kTwoPools,
                   .prefill = kNoPrefill,
                   .configure = [](RouterConfig* c) { c->rebalance_kv_utilization = 0.9; },
                   .max_tokens = 100,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {SetFree("d1", 5), kDecodeOpen, ""},
                             {SetFree("d2", 5), kDecodeOpen, ""},
                             {Tokens(0, "ab"), kStreaming, "Started(d1,) Chunk(ab)"}}});
  // d2 (empty) would be past the threshold once it took the stream: no
  // move, so no move back either.
  cases.push_back({.name = "NoMoveOntoAWorkerTheStreamWouldFill",
                   .decode = {{"d1", 60, 0, "fp", 100}, {"d2", 50, 0, "fp", 100}},
                   .prefill = kNoPrefill,
                   .configure = [](RouterConfig* c) { c->rebalance_kv_utilization = 0.5; },
                   .max_tokens = 900,  // 58 blocks
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {SetFree("d1", 5), kDecodeOpen, ""},
                             {SetFree("d2", 100), kDecodeOpen, ""},
                             {Tokens(0, "ab"), kStreaming, "Started(d1,) Chunk(ab)"}}});
  cases.push_back({.name = "NoMoveForAStreamNearItsEnd",
                   .decode = kTwoPools,
                   .prefill = kNoPrefill,
                   .configure = [](RouterConfig* c) { c->rebalance_kv_utilization = 0.9; },
                   .max_tokens = 60,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {SetFree("d1", 5), kDecodeOpen, ""},
                             {Tokens(0, "ab"), kStreaming, "Started(d1,) Chunk(ab)"}}});
  cases.push_back({.name = "RebalancingIsOffByDefault",
                   .decode = kTwoPools,
                   .prefill = kNoPrefill,
                   .max_tokens = 100,
                   .steps = {{Start(), kDecodeOpen, "decode(d1,local) watchdog(1s)"},
                             {SetFree("d1", 5), kDecodeOpen, ""},
                             {Tokens(0, "ab"), kStreaming, "Started(d1,) Chunk(ab)"}}});
  return cases;
}

class GenerateFsmTest : public ::testing::TestWithParam<Case> {};

TEST_P(GenerateFsmTest, FollowsTheScript) {
  const Case& c = GetParam();
  FakeClock clock;
  FakeWorkers workers(&clock, c.decode, c.prefill);
  RouterConfig config;
  if (c.configure != nullptr) c.configure(&config);
  CircuitBreaker breaker(config.breaker_options());
  std::atomic<uint64_t> decode_ticket{0};
  std::atomic<uint64_t> prefill_ticket{0};
  std::unique_ptr<Tokenizer> tokenizer = ByteTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  GenerateFsm::Env env;
  env.config = &config;
  env.tokenizer = tokenizer.get();
  env.model_fingerprint = "fp";
  env.workers = &workers;
  env.decode_ticket = &decode_ticket;
  env.prefill_ticket = &prefill_ticket;
  env.breaker = &breaker;
  RebalanceGate gate(absl::Seconds(1));
  env.rebalance = &gate;
  env.clock = &clock;
  env.jitter = [] { return 0.0; };
  GenerateFsm fsm(env);

  // The latest of each RPC and timer, for events that name none.
  int decode = -1;
  int prefill = -1;
  int retry = -1;
  int handoff = -1;
  uint64_t retry_placement = 0;
  std::vector<uint64_t> backoffs;  // ids, in the order started
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const Step& step = c.steps[i];
    SCOPED_TRACE(absl::StrCat("step ", i, ", expecting \"", step.actions, "\""));
    const Ev& ev = step.ev;
    GenerateFsm::Actions a;
    v1::DecodeEvent event;
    switch (ev.kind) {
      case Kind::kStart:
      case Kind::kStartInvalid: {
        ValidatedRequest request;
        request.prompt_tokens.assign(20, 'x');
        request.max_tokens = c.max_tokens;
        request.stop = c.stop;
        absl::StatusOr<ValidatedRequest> validated = std::move(request);
        if (ev.kind == Kind::kStartInvalid) validated = absl::InvalidArgumentError("no input");
        a = fsm.Start("r-1", std::move(validated), clock.now + c.deadline, clock.now + c.deadline);
        break;
      }
      case Kind::kReserved:
        event.mutable_reserved()->set_transfer_id(7);
        event.mutable_reserved()->set_epoch(static_cast<uint64_t>(ev.n));
        a = fsm.OnDecodeEvent(decode, event);
        break;
      case Kind::kTokens:
        event.mutable_tokens()->set_first_index(static_cast<int32_t>(ev.n));
        for (unsigned char ch : ev.text) event.mutable_tokens()->add_ids(ch);
        a = fsm.OnDecodeEvent(decode, event);
        break;
      case Kind::kFinished:
        event.mutable_finished()->set_reason(ev.reason);
        a = fsm.OnDecodeEvent(decode, event);
        break;
      case Kind::kEmptyEvent:
        a = fsm.OnDecodeEvent(decode, event);
        break;
      case Kind::kDecodeEnd:
        a = fsm.OnDecodeDone(ev.attempt >= 0 ? ev.attempt : decode, grpc::Status(ev.code, "broke"));
        break;
      case Kind::kPrefillDone: {
        v1::PrefillResponse response;
        response.set_compute_ms(7);
        a = fsm.OnPrefillDone(ev.attempt >= 0 ? ev.attempt : prefill,
                              grpc::Status(ev.code, ev.code == OK ? "" : "failed"), response);
        break;
      }
      case Kind::kRetryDone:
        a = fsm.OnTransferRetryDone(retry, retry_placement,
                                    grpc::Status(ev.code, ev.code == OK ? "" : "no"),
                                    static_cast<uint64_t>(ev.n));
        break;
      case Kind::kBackoffFires:
        a = fsm.OnBackoffDone(backoffs.empty() ? 0
                              : ev.attempt < 0 ? backoffs.back()
                                               : backoffs.at(ev.attempt));
        break;
      case Kind::kWatchdogFires:
        a = fsm.OnWatchdog(/*fired=*/true);
        break;
      case Kind::kCancel:
        a = fsm.OnClientCancel();
        break;
      case Kind::kWriteFailed:
        a = fsm.OnClientWriteFailed();
        break;
      case Kind::kPauseReads:
        fsm.PauseReads();
        break;
      case Kind::kDrained:
        a = fsm.OnClientDrained();
        break;
      case Kind::kAdvance:
        clock.now += ev.d;
        break;
      case Kind::kSilence:
        workers.Silence(ev.text);
        break;
      case Kind::kProgress:
        workers.Progress(ev.text);
        break;
      case Kind::kUnreachable:
        workers.MakeUnreachable(ev.text);
        break;
      case Kind::kMigrating:
        event.mutable_migrating()->set_generated_tokens(static_cast<int32_t>(ev.n));
        event.mutable_migrating()->set_offer_id(42);
        a = fsm.OnDecodeEvent(decode, event);
        break;
      case Kind::kSetFree:
        workers.SetFree(ev.text, static_cast<uint32_t>(ev.n));
        break;
      case Kind::kHandoffDone: {
        v1::HandoffResponse response;
        response.set_kv_transfer_bytes(4096);
        a = fsm.OnHandoffDone(handoff, grpc::Status(ev.code, ev.code == OK ? "" : "lost"),
                              response);
        break;
      }
    }
    if (a.start_handoff.has_value()) handoff = a.start_handoff->attempt;
    if (a.start_decode.has_value()) decode = a.start_decode->attempt;
    if (a.start_prefill.has_value()) prefill = a.start_prefill->attempt;
    if (a.start_transfer_retry.has_value()) {
      retry = a.start_transfer_retry->attempt;
      retry_placement = a.start_transfer_retry->placement;
    }
    if (a.start_backoff.has_value()) backoffs.push_back(a.start_backoff->id);
    EXPECT_EQ(GenerateFsm::StateName(fsm.state()), GenerateFsm::StateName(step.state));
    EXPECT_EQ(Describe(a), step.actions);
    if (!step.message.empty()) {
      ASSERT_TRUE(a.outcome.has_value());
      EXPECT_THAT(a.outcome->error_message(), HasSubstr(step.message));
    }
  }
}

// A failing case prints its name, not its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

INSTANTIATE_TEST_SUITE_P(Transitions, GenerateFsmTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// Every state the table reaches, so that a new state cannot go untested.
TEST(GenerateFsmTableTest, CoversEveryState) {
  std::set<State> seen;
  for (const Case& c : Cases()) {
    for (const Step& s : c.steps) seen.insert(s.state);
  }
  for (State s : {State::kAdmitted, State::kPlacing, State::kDecodeOpen, State::kPrefilling,
                  State::kStreaming, State::kCompleting, State::kDone}) {
    EXPECT_TRUE(seen.count(s)) << GenerateFsm::StateName(s);
  }
}

}  // namespace
}  // namespace pdserve::router
