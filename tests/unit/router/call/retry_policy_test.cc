// Which failures the router retries on another worker, and the backoff.
#include "router/call/retry_policy.h"

#include "gtest/gtest.h"
#include "router/config/router_config.h"

namespace pdserve::router {
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

}  // namespace
}  // namespace pdserve::router
