// The /metrics HTTP server, scraped over loopback with a plain socket, and
// its routing (MetricsHttpAnswer).
#include "common/metrics/metrics_http_server.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <atomic>
#include <string>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

class MetricsHttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.GetCounter("pdserve_test_total", "Test counter.")->Increment(2);
    MetricsHttpServerOptions o;
    o.listen_address = "127.0.0.1:0";
    o.read_timeout = absl::Milliseconds(300);
    o.max_request_bytes = 1024;
    o.ready = [this] { return ready_.load(); };
    auto s = MetricsHttpServer::Start(o, &registry_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  tcp::socket Connect() {
    tcp::socket socket(io_);
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()));
    return socket;
  }

  // Sends `request` and reads until the server closes the connection.
  std::string RoundTrip(const std::string& request) {
    tcp::socket socket = Connect();
    asio::write(socket, asio::buffer(request));
    std::string response;
    boost::system::error_code ec;
    asio::read(socket, asio::dynamic_buffer(response), ec);
    EXPECT_EQ(ec, asio::error::eof);
    return response;
  }

  asio::io_context io_;
  std::atomic<bool> ready_{false};
  MetricsRegistry registry_;
  std::unique_ptr<MetricsHttpServer> server_;
};

TEST_F(MetricsHttpServerTest, ScrapesMetrics) {
  const std::string r =
      RoundTrip("GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: text/plain\r\n\r\n");
  EXPECT_THAT(r, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(r, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  const std::string body = registry_.Expose();
  EXPECT_THAT(r, HasSubstr("Content-Length: " + std::to_string(body.size()) + "\r\n"));
  EXPECT_THAT(r, HasSubstr("\r\n\r\n" + body));
  EXPECT_THAT(r, HasSubstr("pdserve_test_total 2\n"));
}

TEST_F(MetricsHttpServerTest, QueryStringIsIgnored) {
  EXPECT_THAT(RoundTrip("GET /metrics?x=1 HTTP/1.0\r\n\r\n"), StartsWith("HTTP/1.1 200 OK"));
}

TEST_F(MetricsHttpServerTest, OtherPathsAre404) {
  EXPECT_THAT(RoundTrip("GET / HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 404 Not Found"));
  EXPECT_THAT(RoundTrip("GET /metricsx HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 404"));
}

// Kubernetes probes over plain HTTP: alive while it answers; ready as the
// process says (its gRPC health), so a draining pod leaves the Service.
TEST_F(MetricsHttpServerTest, ProbesReportLivenessAndReadiness) {
  EXPECT_THAT(RoundTrip("GET /healthz HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 200 OK"));
  EXPECT_THAT(RoundTrip("GET /readyz HTTP/1.1\r\n\r\n"),
              StartsWith("HTTP/1.1 503 Service Unavailable"));
  ready_ = true;
  EXPECT_THAT(RoundTrip("GET /readyz HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 200 OK"));
  ready_ = false;  // draining
  EXPECT_THAT(RoundTrip("GET /readyz?verbose HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(RoundTrip("GET /healthz HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 200 OK"));
  EXPECT_THAT(RoundTrip("POST /readyz HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
              StartsWith("HTTP/1.1 405"));
}

TEST_F(MetricsHttpServerTest, HeadGetsTheHeadersWithoutTheBody) {
  const std::string r = RoundTrip("HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_THAT(r, StartsWith("HTTP/1.1 200 OK"));
  EXPECT_THAT(r, HasSubstr("Content-Length: "));
  EXPECT_THAT(r, Not(HasSubstr("Content-Length: 0\r\n")));  // the GET body's length
  EXPECT_EQ(r.find("\r\n\r\n") + 4, r.size()) << r;
}

TEST_F(MetricsHttpServerTest, OtherMethodsAndGarbage) {
  const std::string post = RoundTrip("POST /metrics HTTP/1.1\r\n\r\n");
  EXPECT_THAT(post, StartsWith("HTTP/1.1 405"));
  EXPECT_THAT(post, HasSubstr("Allow: GET, HEAD\r\n"));
  EXPECT_THAT(RoundTrip("hello\r\n\r\n"), StartsWith("HTTP/1.1 400"));
}

TEST_F(MetricsHttpServerTest, OversizedRequestIsRefused) {
  const std::string r =
      RoundTrip("GET /metrics HTTP/1.1\r\nX-Big: " + std::string(4096, 'a') + "\r\n\r\n");
  EXPECT_THAT(r, StartsWith("HTTP/1.1 431"));
}

TEST_F(MetricsHttpServerTest, SilentClientIsDisconnected) {
  tcp::socket socket = Connect();
  asio::write(socket, asio::buffer(std::string("GET /metrics HTTP/1.1\r\n")));  // no end
  const absl::Time start = absl::Now();
  std::string response;
  boost::system::error_code ec;
  asio::read(socket, asio::dynamic_buffer(response), ec);
  EXPECT_TRUE(ec == asio::error::eof || ec == asio::error::connection_reset) << ec.message();
  EXPECT_TRUE(response.empty());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(MetricsHttpServerTest, ServesManyScrapesAndStopsCleanly) {
  tcp::socket idle = Connect();  // still open when the server stops
  for (int i = 0; i < 20; ++i) {
    EXPECT_THAT(RoundTrip("GET /metrics HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 200"));
  }
  server_.reset();
}

TEST(MetricsHttpAnswerTest, RoutesByPathThenMethod) {
  MetricsRegistry r;
  r.GetCounter("pdserve_test_total", "Test counter.")->Increment(1);
  const MetricsHttpReply get = MetricsHttpAnswer("GET", "/metrics", r);
  EXPECT_EQ(get.status, 200);
  EXPECT_THAT(get.content_type, StartsWith("text/plain; version=0.0.4"));
  EXPECT_EQ(get.body, r.Expose());
  EXPECT_EQ(MetricsHttpAnswer("HEAD", "/metrics", r).body, r.Expose());  // HttpServer drops it
  EXPECT_EQ(MetricsHttpAnswer("GET", "/metrics?x=1", r).status, 200);
  EXPECT_EQ(MetricsHttpAnswer("GET", "/", r).status, 404);
  EXPECT_EQ(MetricsHttpAnswer("GET", "/readyz", r).status, 200);  // no readiness: always
  EXPECT_EQ(MetricsHttpAnswer("GET", "/readyz", r, [] { return false; }).status, 503);
  EXPECT_EQ(MetricsHttpAnswer("GET", "/healthz", r, [] { return false; }).status, 200);
  EXPECT_EQ(MetricsHttpAnswer("POST", "/other", r).status, 404);
  const MetricsHttpReply post = MetricsHttpAnswer("POST", "/metrics", r);
  EXPECT_EQ(post.status, 405);
  EXPECT_THAT(post.headers,
              ::testing::Contains(std::make_pair(std::string("Allow"), std::string("GET, HEAD"))));
  EXPECT_EQ(MetricsHttpAnswer("GET", "*", r).status, 400);
  EXPECT_EQ(MetricsHttpAnswer("GET", "http://host/metrics", r).status, 400);
}

TEST(MetricsHttpServerStartTest, BadAddressFails) {
  MetricsRegistry r;
  MetricsHttpServerOptions o;
  o.listen_address = "not-an-ip:0";
  EXPECT_FALSE(MetricsHttpServer::Start(o, &r).ok());
}

}  // namespace
}  // namespace pdserve
