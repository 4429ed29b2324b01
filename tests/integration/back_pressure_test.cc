// Back pressure end to end (docs/protocol/request-state-machine.md): streamed
// HTTP and gRPC clients that never read hold the router to a few messages each
// (its buffered bytes and RSS stay flat), their decode sequences are
// paused (out of the batch, blocks kept) rather than generated for nobody,
// other clients are served meanwhile, a client that reads again gets its
// whole stream, and once the silent ones hang up every block is free.
#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cluster_test_util.h"
#include "tests/testing/http_test_client.h"

namespace pdserve {
namespace {

namespace asio = boost::asio;
using Json = nlohmann::json;

constexpr int kSilentClients = 4;
constexpr int kMaxTokens = 2000;

// A streamed completion whose client reads nothing after sending it, with
// a small receive buffer so the router's socket fills soon.
class SilentClient {
 public:
  SilentClient(asio::io_context& io, const std::string& address) : socket_(io) {
    socket_.open(asio::ip::tcp::v4());
    socket_.set_option(asio::socket_base::receive_buffer_size(4096));
    socket_.connect(testing::internal::Endpoint(address));
    const std::string body = Json{{"prompt", "Once upon a time"},
                                  {"max_tokens", kMaxTokens},
                                  {"ignore_eos", true},
                                  {"temperature", 0},
                                  {"stream", true},
                                  {"stream_options", {{"include_usage", true}}}}
                                 .dump();
    const std::string request = absl::StrCat(
        "POST /v1/completions HTTP/1.1\r\nHost: ", address,
        "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
    asio::write(socket_, asio::buffer(request));
  }

  // Reads the whole stream now: its usage's completion_tokens, or -1.
  int ReadToTheEnd() {
    std::string all;
    boost::system::error_code ec;
    char buf[65536];
    while (all.find("data: [DONE]") == std::string::npos) {
      const size_t n = socket_.read_some(asio::buffer(buf), ec);
      if (ec) break;
      all.append(buf, n);
    }
    constexpr std::string_view kKey = "\"completion_tokens\":";
    const size_t at = all.rfind(kKey);
    if (at == std::string::npos || all.find("data: [DONE]") == std::string::npos) return -1;
    return std::atoi(all.c_str() + at + kKey.size());
  }

  void Close() {
    boost::system::error_code ec;
    socket_.close(ec);
  }

 private:
  asio::ip::tcp::socket socket_;
};

int64_t RssKiB(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// Polls `metric` on `port` until it equals `want` (bounded).
bool AwaitMetric(int port, const std::string& metric, double want, absl::Duration within) {
  const absl::Time deadline = absl::Now() + within;
  while (absl::Now() < deadline) {
    if (testing::ScrapeMetric(port, metric) == want) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

TEST(BackPressureTest, ClientsThatDoNotReadPauseTheirSequencesAndHoldNothing) {
  if (testing::RealModelPath().empty()) GTEST_SKIP() << "real model not found";
  LocalClusterOptions o;
  o.extra_router_flags = {"--metrics_port=-1"};
  o.extra_decode_flags = {"--metrics_port=-1"};
  auto cluster = testing::StartCluster(o, "back-pressure");
  ASSERT_NE(cluster, nullptr);
  const int router_metrics = cluster->metrics_port("router");
  const int decode_metrics = cluster->metrics_port("decode-0");
  pid_t router_pid = -1;
  for (const ClusterProcess& p : cluster->processes()) {
    if (p.name == "router") router_pid = p.pid;
  }

  asio::io_context io;
  std::vector<std::unique_ptr<SilentClient>> silent;
  for (int i = 0; i < kSilentClients - 1; ++i) {
    silent.push_back(std::make_unique<SilentClient>(io, cluster->http_address()));
  }
  // And one over gRPC: the stream is open, nothing is read from it. Its
  // channel keeps HTTP/2's 64 KiB window (no BDP growth), as a client
  // whose library would otherwise take the whole stream into its own
  // memory: the router and the decode worker must then hold still.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto grpc_stub = v1::Generation::NewStub(grpc::CreateCustomChannel(
      cluster->router_address(), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext grpc_silent;
  v1::GenerateRequest long_request = testing::TextRequest("Once upon a time", kMaxTokens);
  long_request.set_ignore_eos(true);
  // Twenty alternatives per token: the stream outgrows any flow-control
  // window the client's channel would hold for it.
  long_request.mutable_sampling()->set_logprobs(20);
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> grpc_reader =
      grpc_stub->Generate(&grpc_silent, long_request);
  // Every silent stream ends up paused on the decode worker, long before
  // its max_tokens, and its reads paused at the router.
  ASSERT_TRUE(AwaitMetric(decode_metrics, "pdserve_decode_paused_sequences", kSilentClients,
                          absl::Minutes(3)))
      << "paused: " << testing::ScrapeMetric(decode_metrics, "pdserve_decode_paused_sequences");
  EXPECT_TRUE(AwaitMetric(router_metrics, "pdserve_router_paused_streams", kSilentClients,
                          absl::Seconds(30)));
  // The router holds a bounded few messages per stream (32 token chunks
  // of well under 1 KiB), and its memory does not grow while they wait.
  const double buffered =
      testing::ScrapeMetric(router_metrics, "pdserve_router_client_buffered_bytes");
  EXPECT_GE(buffered, 0);
  EXPECT_LE(buffered, kSilentClients * 32 * 1024);
  const int64_t rss_before = RssKiB(router_pid);

  // Others are served meanwhile, with the tokens they would get alone.
  auto stub = testing::RouterStub(cluster->router_address());
  const testing::GenerateOutcome served =
      testing::Generate(*stub, testing::ChatRequest("Name three colours.", 24), absl::Minutes(1));
  ASSERT_TRUE(served.status.ok()) << served.status.error_message();
  EXPECT_FALSE(served.ids.empty());
  EXPECT_EQ(testing::ScrapeMetric(decode_metrics, "pdserve_decode_paused_sequences"),
            kSilentClients);
  const int64_t rss_after = RssKiB(router_pid);
  EXPECT_LE(rss_after - rss_before, 8 * 1024) << "router RSS grew from " << rss_before << " KiB";

  // A client that reads again resumes and gets its whole stream.
  EXPECT_EQ(silent[0]->ReadToTheEnd(), kMaxTokens);
  // The others hang up: cancelled on both tiers, every block free.
  for (auto& c : silent) c->Close();
  grpc_silent.TryCancel();
  EXPECT_TRUE(testing::PoolsIdle(*cluster, absl::Seconds(30)));
  EXPECT_TRUE(AwaitMetric(decode_metrics, "pdserve_decode_paused_sequences", 0, absl::Seconds(10)));
  EXPECT_TRUE(AwaitMetric(router_metrics, "pdserve_router_paused_streams", 0, absl::Seconds(10)));
  EXPECT_TRUE(
      AwaitMetric(router_metrics, "pdserve_router_client_buffered_bytes", 0, absl::Seconds(10)));
}

}  // namespace
}  // namespace pdserve
