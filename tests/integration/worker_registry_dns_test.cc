// DNS discovery in the WorkerRegistry: a dns:/// target expands into one
// worker per resolved address, and workers join and leave the pool as the
// answers change, without a restart. A scripted resolver stands in for DNS
// (the fakes listen on distinct 127.0.0.0/8 addresses sharing one port, as
// pods behind a headless Service do); one test goes through getaddrinfo.
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "router/pool/worker_registry.h"
#include "tests/testing/fake_workers.h"

namespace pdserve::router {
namespace {

using test::FakeDecodeWorker;
using test::FakeKvBus;
using test::FakePrefillWorker;

// Answers what the test last set; counts the questions.
class ScriptedResolver {
 public:
  void Answer(absl::StatusOr<std::vector<std::string>> answer) {
    absl::MutexLock lock(&mu_);
    answer_ = std::move(answer);
  }
  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  DnsResolver AsFunction() {
    return [this](const std::string& host) {
      absl::MutexLock lock(&mu_);
      ++calls_;
      EXPECT_EQ(host, "decode.test");
      return answer_;
    };
  }

 private:
  absl::Mutex mu_;
  absl::StatusOr<std::vector<std::string>> answer_ ABSL_GUARDED_BY(mu_);
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
};

bool Eventually(const std::function<bool()>& condition) {
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (absl::Now() < until) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return condition();
}

// The decode tier as "address" (usable) / "address?" (not usable), sorted.
std::vector<std::string> DecodeTier(const WorkerRegistry& registry) {
  auto snap = registry.snapshot();
  std::vector<std::string> out;
  for (const WorkerState& w : snap->decode) {
    out.push_back(w.address + (IsUsable(w, snap->stale_after, absl::Now()) ? "" : "?"));
  }
  std::sort(out.begin(), out.end());
  return out;
}

class WorkerRegistryDnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = std::make_unique<FakeDecodeWorker>(FakeDecodeWorker::Options{}, &bus_);
    port_ = a_->port();
    FakeDecodeWorker::Options b;
    b.host = "127.0.0.2";
    b.port = port_;
    b_ = std::make_unique<FakeDecodeWorker>(b, &bus_);
    ASSERT_EQ(b_->port(), port_) << "127.0.0.2:" << port_ << " is taken";
  }

  void StartRegistry(std::vector<std::string> prefill = {}) {
    WorkerRegistry::Options o;
    o.decode_addresses = {"dns:///decode.test:" + std::to_string(port_)};
    o.prefill_addresses = std::move(prefill);
    o.load_interval = absl::Milliseconds(20);
    o.dns_refresh = absl::Milliseconds(20);
    o.resolver = resolver_.AsFunction();
    registry_ = std::make_unique<WorkerRegistry>(o);
    registry_->Start();
  }

  std::string A() const { return a_->address(); }
  std::string B() const { return b_->address(); }

  FakeKvBus bus_;
  std::unique_ptr<FakeDecodeWorker> a_;
  std::unique_ptr<FakeDecodeWorker> b_;
  int port_ = 0;
  ScriptedResolver resolver_;
  std::unique_ptr<WorkerRegistry> registry_;
};

TEST_F(WorkerRegistryDnsTest, WorkersJoinAndLeaveAsTheAnswersChange) {
  resolver_.Answer(std::vector<std::string>{"127.0.0.1"});
  StartRegistry();
  using V = std::vector<std::string>;
  EXPECT_TRUE(Eventually([&] { return DecodeTier(*registry_) == V{A()}; }));

  resolver_.Answer(V{"127.0.0.2", "127.0.0.1", "127.0.0.2"});  // duplicates collapse
  EXPECT_TRUE(Eventually([&] { return DecodeTier(*registry_) == V{A(), B()}; }));
  EXPECT_NE(registry_->decode_stub(B()), nullptr);

  resolver_.Answer(V{"127.0.0.2"});
  EXPECT_TRUE(Eventually([&] { return DecodeTier(*registry_) == V{B()}; }));
  EXPECT_EQ(registry_->decode_stub(A()), nullptr);

  // An address that left may come back.
  resolver_.Answer(V{"127.0.0.1"});
  EXPECT_TRUE(Eventually([&] { return DecodeTier(*registry_) == V{A()}; }));
}

TEST_F(WorkerRegistryDnsTest, AFailedOrEmptyAnswerKeepsTheLastKnownSet) {
  resolver_.Answer(std::vector<std::string>{"127.0.0.1", "127.0.0.2"});
  StartRegistry();
  const std::vector<std::string> both = {A(), B()};
  ASSERT_TRUE(Eventually([&] { return DecodeTier(*registry_) == both; }));
  for (auto answer : {absl::StatusOr<std::vector<std::string>>(absl::UnavailableError("SERVFAIL")),
                      absl::StatusOr<std::vector<std::string>>(std::vector<std::string>{})}) {
    resolver_.Answer(answer);
    const int calls = resolver_.calls();
    ASSERT_TRUE(Eventually([&] { return resolver_.calls() >= calls + 5; }));
    EXPECT_EQ(DecodeTier(*registry_), both);
  }
}

TEST_F(WorkerRegistryDnsTest, ARequestKeepsItsChannelAfterItsWorkerLeft) {
  resolver_.Answer(std::vector<std::string>{"127.0.0.1"});
  StartRegistry();
  ASSERT_TRUE(Eventually([&] { return DecodeTier(*registry_) == std::vector{A()}; }));
  std::shared_ptr<v1::DecodeWorker::Stub> held = registry_->decode_stub(A());
  ASSERT_NE(held, nullptr);
  resolver_.Answer(std::vector<std::string>{"127.0.0.2"});
  ASSERT_TRUE(Eventually([&] { return registry_->decode_stub(A()) == nullptr; }));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::WorkerInfo info;
  EXPECT_TRUE(held->GetInfo(&ctx, v1::GetInfoRequest(), &info).ok());
}

TEST_F(WorkerRegistryDnsTest, StaticTargetsStayWhileDnsOnesChange) {
  FakePrefillWorker prefill(FakePrefillWorker::Options{}, &bus_);
  resolver_.Answer(std::vector<std::string>{"127.0.0.1"});
  StartRegistry({prefill.address()});
  // Static workers are known before the first resolution.
  ASSERT_EQ(registry_->snapshot()->prefill.size(), 1u);
  resolver_.Answer(std::vector<std::string>{"127.0.0.2"});
  EXPECT_TRUE(Eventually([&] { return DecodeTier(*registry_) == std::vector{B()}; }));
  auto snap = registry_->snapshot();
  ASSERT_EQ(snap->prefill.size(), 1u);
  EXPECT_EQ(snap->prefill[0].address, prefill.address());
  // Usable once its watcher reached it: a first probe may fail (one
  // refused connect was seen under ASan with tests in parallel) and is
  // retried with backoff, DNS changes or not.
  EXPECT_TRUE(Eventually([&] {
    auto now = registry_->snapshot();
    return now->prefill.size() == 1 && now->prefill[0].address == prefill.address() &&
           IsUsable(now->prefill[0], now->stale_after, absl::Now());
  }));
}

// The product resolver: localhost's A (and, where configured, AAAA) records.
TEST(WorkerRegistryGetAddrInfoTest, LocalhostExpandsToItsLoopbackAddresses) {
  FakeKvBus bus;
  FakeDecodeWorker worker(FakeDecodeWorker::Options{}, &bus);
  WorkerRegistry::Options o;
  o.decode_addresses = {"dns:///localhost:" + std::to_string(worker.port())};
  o.load_interval = absl::Milliseconds(20);
  o.dns_refresh = absl::Milliseconds(50);
  WorkerRegistry registry(o);
  registry.Start();
  // 127.0.0.1 serves; [::1] (if localhost has it) has no listener.
  EXPECT_TRUE(Eventually([&] {
    auto tier = DecodeTier(registry);
    return std::find(tier.begin(), tier.end(), worker.address()) != tier.end();
  }));
  for (const WorkerState& w : registry.snapshot()->decode) {
    EXPECT_TRUE(w.address == worker.address() ||
                w.address == "[::1]:" + std::to_string(worker.port()))
        << w.address;
  }
}

}  // namespace
}  // namespace pdserve::router
