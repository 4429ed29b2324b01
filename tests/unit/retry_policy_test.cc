// Which failures the router retries on another worker, and the backoff.
#include "router/retry_policy.h"

#include "gtest/gtest.h"
#include "router/router_config.h"

namespace pdserve {
namespace {

struct Row {
  grpc::StatusCode code;
  bool deadline_passed;
  bool prefill_retry;
  bool decode_failover;
  bool counts_against_worker;  // circuit breaker, prefill side
};

TEST(RetryPolicyTest, RetryableFailuresTable) {
  using C = grpc::StatusCode;
  const Row rows[] = {
      {C::UNAVAILABLE, false, true, true, true},           // process died
      {C::UNKNOWN, false, true, true, true},               // stream reset
      {C::INTERNAL, false, true, true, true},              // transport error
      {C::ABORTED, false, true, true, false},              // transfer aborted
      {C::DATA_LOSS, false, true, true, true},             // cut mid-payload
      {C::CANCELLED, false, true, true, false},            // worker's server cancelled
      {C::DEADLINE_EXCEEDED, false, true, false, false},   // attempt timeout / KV wait
      {C::UNAUTHENTICATED, false, true, false, false},     // a KV secret the pair does not share
      {C::PERMISSION_DENIED, false, true, false, false},
      {C::RESOURCE_EXHAUSTED, false, true, false, false},  // that worker is full
      {C::INVALID_ARGUMENT, false, false, false, false},   // the request is bad
      {C::OUT_OF_RANGE, false, false, false, false},
      {C::FAILED_PRECONDITION, false, false, false, false},  // incompatible pair
      {C::NOT_FOUND, false, false, false, false},
      {C::OK, false, false, false, false},
      {C::UNAVAILABLE, true, false, false, true},         // the request's deadline is over
      {C::DEADLINE_EXCEEDED, true, false, false, false},  // ... and that is why it failed
  };
  for (const Row& r : rows) {
    const grpc::Status s(r.code, "x");
    EXPECT_EQ(IsRetryableWorkerFailure(s, r.deadline_passed), r.prefill_retry)
        << r.code << " deadline_passed=" << r.deadline_passed;
    EXPECT_EQ(IsRetryableDecodeFailure(s, r.deadline_passed), r.decode_failover)
        << r.code << " deadline_passed=" << r.deadline_passed;
    EXPECT_EQ(IsWorkerHealthFailure(s), r.counts_against_worker)
        << r.code << " deadline_passed=" << r.deadline_passed;
  }
}

TEST(RetryPolicyTest, BackoffDoublesUpToTheCapAndJittersDownByHalf) {
  RetryOptions o;
  o.backoff_base = absl::Milliseconds(20);
  o.backoff_max = absl::Milliseconds(100);
  EXPECT_EQ(RetryBackoff(o, 1, 0), absl::Milliseconds(20));
  EXPECT_EQ(RetryBackoff(o, 2, 0), absl::Milliseconds(40));
  EXPECT_EQ(RetryBackoff(o, 3, 0), absl::Milliseconds(80));
  EXPECT_EQ(RetryBackoff(o, 4, 0), absl::Milliseconds(100));
  EXPECT_EQ(RetryBackoff(o, 40, 0), absl::Milliseconds(100));
  EXPECT_EQ(RetryBackoff(o, 1, 0.5), absl::Milliseconds(15));
  EXPECT_EQ(RetryBackoff(o, 4, 1.0), absl::Milliseconds(50));
}

TEST(RetryPolicyTest, AttemptTimeoutStaysBelowTheDecodeWorkersKvWait) {
  RouterConfig c;
  c.kv_wait_ms = 4000;
  c.prefill_attempt_timeout_ms = 0;
  EXPECT_EQ(c.retry_options().prefill_attempt_timeout, absl::Milliseconds(3000));
  c.prefill_attempt_timeout_ms = 10000;
  EXPECT_EQ(c.retry_options().prefill_attempt_timeout, absl::Milliseconds(3000));
  c.prefill_attempt_timeout_ms = 1000;
  EXPECT_EQ(c.retry_options().prefill_attempt_timeout, absl::Milliseconds(1000));
  c.model_path = "model.gguf";
  c.decode_addresses = {"127.0.0.1:1"};
  EXPECT_TRUE(c.Validate().ok());
  c.prefill_attempt_timeout_ms = -1;
  EXPECT_FALSE(c.Validate().ok());
  c.prefill_attempt_timeout_ms = 0;
  c.decode_failovers = -1;
  EXPECT_FALSE(c.Validate().ok());
}

// A long prompt gets a KV wait and an attempt timeout it can be computed
// in; a short or unmeasured one keeps the configured ones.
TEST(RetryPolicyTest, PrefillWindowsFitTheCompute) {
  RetryOptions o;
  o.prefill_attempt_timeout = absl::Milliseconds(7500);
  const absl::Duration kv_wait = absl::Seconds(10);
  struct Row {
    absl::Duration compute, kv_wait, attempt;
  };
  const Row rows[] = {
      {absl::ZeroDuration(), absl::Seconds(10), absl::Milliseconds(7500)},  // not measured
      {absl::Seconds(1), absl::Seconds(10), absl::Milliseconds(7500)},      // fits already
      {absl::Seconds(6), absl::Seconds(13), absl::Seconds(9.75)},           // 3/4 of 13 s
      {absl::Seconds(20), absl::Seconds(41), absl::Seconds(30.75)},
      {absl::Seconds(100), absl::Seconds(60), absl::Seconds(45)},  // the decode worker's cap
  };
  for (const Row& r : rows) {
    const PrefillWindows w = SizePrefillWindows(o, kv_wait, r.compute);
    EXPECT_EQ(w.kv_wait, r.kv_wait) << r.compute;
    EXPECT_EQ(w.attempt_timeout, r.attempt) << r.compute;
    EXPECT_LE(w.attempt_timeout, w.kv_wait * 3 / 4);
  }
  o.prefill_attempt_timeout = absl::ZeroDuration();  // request deadline only
  EXPECT_EQ(SizePrefillWindows(o, kv_wait, absl::Seconds(20)).attempt_timeout,
            absl::ZeroDuration());
}

}  // namespace
}  // namespace pdserve
