// KV migration on a real cluster (docs/protocol/request-state-machine.md, "KV migration"): a
// decode worker SIGTERMed under load, as in a rolling update or an HPA
// scale-in, hands its long streams to the other decode worker with their
// KV. Every client sees one uninterrupted stream with the tokens an
// undisturbed run gives, no request is recomputed, and the drained worker
// gives back every block before it exits. With rebalancing on, a stream
// moves the same way off a nearly full worker onto one that joined.
#include <signal.h>

#include <atomic>
#include <functional>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/testing/cluster_test_util.h"
#include "tests/testing/file_contents.h"

namespace pdserve {
namespace {

using testing::Generate;
using testing::GenerateOutcome;
using testing::StartCluster;

const absl::Duration kTimeout = absl::Seconds(300);

// Long enough that a drain window of a few seconds cannot finish them.
std::vector<v1::GenerateRequest> LongRequests(int max_tokens) {
  std::vector<v1::GenerateRequest> out;
  for (const char* text : {"Once upon a time, there was a little", "The history of Rome began",
                           "def quicksort(items):\n", "Dear diary, today I", "The recipe calls for",
                           "In a distant galaxy"}) {
    v1::GenerateRequest r = testing::TextRequest(text, max_tokens);
    r.set_ignore_eos(true);
    out.push_back(std::move(r));
  }
  // A seeded sampled stream too: its draws depend on seed and token index
  // only, so the move must not change them either.
  out[1].mutable_sampling()->set_temperature(0.8f);
  out[1].mutable_sampling()->set_seed(1234);
  // A constrained stream: the target's matcher replays the output so far
  // and goes on exactly as the drained worker's would have.
  v1::GenerateRequest constrained = testing::TextRequest("The night sky over the sea", max_tokens);
  constrained.set_ignore_eos(true);
  constrained.mutable_sampling()->mutable_constraint()->set_regex("[a-z ,.]+");
  out.push_back(std::move(constrained));
  return out;
}

// The drained worker's closing line, "drained: F of T KV blocks free, S
// sequences left", once it has been written (bounded wait).
std::smatch AwaitDrainedLine(const std::string& log_path, std::string* log) {
  const std::regex drained(R"(drained: (\d+) of (\d+) KV blocks free, (\d+) sequences left)");
  std::smatch m;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    *log = testing::FileContents(log_path);
    if (std::regex_search(*log, m, drained)) return m;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return m;
}

// Each request alone, one after another: the tokens every path must give.
std::vector<std::vector<int32_t>> Undisturbed(LocalCluster& cluster,
                                              const std::vector<v1::GenerateRequest>& requests) {
  auto stub = testing::RouterStub(cluster.router_address());
  std::vector<std::vector<int32_t>> want;
  for (const v1::GenerateRequest& r : requests) {
    GenerateOutcome out = Generate(*stub, r, kTimeout);
    EXPECT_TRUE(out.status.ok()) << out.status.error_message();
    want.push_back(out.ids);
  }
  return want;
}

// All requests at once; `meanwhile` runs once every stream has output.
std::vector<GenerateOutcome> StreamAll(LocalCluster& cluster,
                                       const std::vector<v1::GenerateRequest>& requests,
                                       const std::function<void()>& meanwhile) {
  std::vector<GenerateOutcome> outs(requests.size());
  std::vector<std::atomic<bool>> streaming(requests.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < requests.size(); ++i) {
    clients.emplace_back([&, i] {
      auto stub = testing::RouterStub(cluster.router_address());
      outs[i] = Generate(*stub, requests[i], kTimeout, 0, &streaming[i]);
    });
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  auto all_streaming = [&] {
    for (const std::atomic<bool>& s : streaming) {
      if (!s.load()) return false;
    }
    return true;
  };
  while (!all_streaming() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  meanwhile();
  for (std::thread& t : clients) t.join();
  return outs;
}

class MigrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::RealModelPath().empty()) GTEST_SKIP() << "real model not found";
  }
};

TEST_F(MigrationTest, SigtermedDecodeWorkerMovesItsStreamsWithTheirKv) {
  LocalClusterOptions o;
  o.prefill = 1;
  o.decode = 2;
  // Every stream moves at the SIGTERM, whatever this machine's speed
  // (--drain_migration=auto would let the fast ones finish in place).
  o.extra_decode_flags = {"--drain_timeout_ms=30000", "--drain_migration=all"};
  auto cluster = StartCluster(o, "migration");
  ASSERT_NE(cluster, nullptr);
  const std::vector<v1::GenerateRequest> requests = LongRequests(/*max_tokens=*/160);
  const std::vector<std::string> decode = cluster->addresses("decode");
  ASSERT_EQ(decode.size(), 2u);

  const std::vector<std::vector<int32_t>> want = Undisturbed(*cluster, requests);

  // All at once, spread over both decode workers; decode-0 is SIGTERMed
  // once every stream has produced output.
  const std::vector<GenerateOutcome> outs =
      StreamAll(*cluster, requests, [&] { cluster->Signal("decode-0", SIGTERM); });

  int moved = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i));
    ASSERT_TRUE(outs[i].status.ok()) << outs[i].status.error_message();
    EXPECT_EQ(outs[i].ids, want[i]);
    const v1::Placement& p = outs[i].finished.placement();
    // Moved with its KV, never recomputed.
    EXPECT_EQ(p.decode_failovers(), 0u);
    if (p.decode_migrations() > 0) {
      EXPECT_EQ(p.decode_migrations(), 1u);
      EXPECT_EQ(p.decode_worker(), decode[1]);
      ++moved;
    }
  }
  // Least-loaded placement spreads seven streams over two workers; some may
  // have finished before the signal took effect.
  EXPECT_GE(moved, 1);

  std::string log;
  const std::smatch drained = AwaitDrainedLine(cluster->log_path("decode-0"), &log);
  ASSERT_FALSE(drained.empty()) << "decode-0 never finished draining:\n" << log;
  EXPECT_EQ(drained[1].str(), drained[2].str()) << "blocks left in use on the drained worker";
  EXPECT_EQ(drained[3].str(), "0");
  EXPECT_NE(log.find("migrated to"), std::string::npos) << log;

  // The target holds no block of the moved streams once they are over.
  const absl::Time idle_by = absl::Now() + absl::Seconds(10);
  absl::StatusOr<v1::LoadReport> load = testing::DecodeLoad(decode[1]);
  while (load.ok() && load->kv_blocks_free() != load->kv_blocks_total() && absl::Now() < idle_by) {
    absl::SleepFor(absl::Milliseconds(100));
    load = testing::DecodeLoad(decode[1]);
  }
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_EQ(load->kv_blocks_free(), load->kv_blocks_total());
}

// Rebalancing (--rebalance_kv_utilization): a scale-out. decode-1 is held
// back (SIGSTOP, so the router sees it go stale) while two long streams
// fill decode-0's pool past the threshold; once decode-1 reports again,
// one stream (one only: moving the second would put decode-1 past the
// threshold) moves onto it with its KV, and both streams end with the
// tokens of undisturbed runs.
TEST_F(MigrationTest, AStreamMovesOntoANewDecodeWorkerWithRoom) {
  LocalClusterOptions o;
  o.prefill = 0;
  o.colocated = true;
  o.decode = 2;
  // Each stream reserves about a third of a pool (76 of 240 blocks).
  o.kv_blocks = 240;
  o.extra_router_flags = {"--rebalance_kv_utilization=0.5"};
  auto cluster = StartCluster(o, "rebalance");
  ASSERT_NE(cluster, nullptr);
  const std::vector<std::string> decode = cluster->addresses("decode");
  std::vector<v1::GenerateRequest> requests = LongRequests(/*max_tokens=*/1200);
  requests.resize(2);
  const std::vector<std::vector<int32_t>> want = Undisturbed(*cluster, requests);

  cluster->Signal("decode-1", SIGSTOP);
  // Until the router no longer places on decode-1 (its reports stopped).
  {
    auto stub = testing::RouterStub(cluster->router_address());
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    int on_decode_0 = 0;
    while (on_decode_0 < 3 && absl::Now() < deadline) {
      v1::GenerateRequest probe = testing::TextRequest("Hi", 1);
      GenerateOutcome out = Generate(*stub, probe, absl::Seconds(20));
      on_decode_0 = out.status.ok() && out.finished.placement().decode_worker() == decode[0]
                        ? on_decode_0 + 1
                        : 0;
    }
    ASSERT_EQ(on_decode_0, 3) << "the router kept placing on the stopped worker";
  }
  const std::vector<GenerateOutcome> outs =
      StreamAll(*cluster, requests, [&] { cluster->Signal("decode-1", SIGCONT); });

  int moved = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i));
    ASSERT_TRUE(outs[i].status.ok()) << outs[i].status.error_message();
    EXPECT_EQ(outs[i].ids, want[i]);
    const v1::Placement& p = outs[i].finished.placement();
    EXPECT_EQ(p.decode_failovers(), 0u);
    if (p.decode_migrations() > 0) {
      EXPECT_EQ(p.decode_worker(), decode[1]);
      ++moved;
    } else {
      EXPECT_EQ(p.decode_worker(), decode[0]);
    }
  }
  EXPECT_EQ(moved, 1);
  EXPECT_TRUE(testing::PoolsIdle(*cluster, absl::Seconds(10)));
}

}  // namespace
}  // namespace pdserve
