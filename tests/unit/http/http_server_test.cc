// HttpServer over real loopback sockets: Beast's client-side parser reads
// the responses, raw writes send what a client would (or should not).
#include "common/http/http_server.h"

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::ip::tcp;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Far above any wait the tests expect; only a hang would reach it.
constexpr absl::Duration kGenerous = absl::Seconds(10);

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(HttpHandler handler) {
    HttpServerOptions o;
    o.listen_address = "127.0.0.1:0";
    o.read_timeout = absl::Milliseconds(200);
    o.max_header_bytes = 1024;
    o.max_body_bytes = 1024;
    auto s = HttpServer::Start(o, std::move(handler));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  // A handler answering "<method> <target> <body>" with 200.
  void StartEcho() {
    Start([](HttpRequest request, std::shared_ptr<HttpResponder> responder) {
      responder->Respond(200, "text/plain",
                         request.method + " " + request.target + " " + request.body);
    });
  }

  tcp::socket Connect() {
    tcp::socket socket(io_);
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()));
    return socket;
  }

  // Reads until the server closes; ec is where the read ended.
  static std::string ReadToEnd(tcp::socket& socket, boost::system::error_code* ec) {
    std::string data;
    asio::read(socket, asio::dynamic_buffer(data), *ec);
    return data;
  }

  static http::response<http::string_body> ReadResponse(tcp::socket& socket,
                                                        boost::beast::flat_buffer& buffer) {
    http::response<http::string_body> res;
    boost::system::error_code ec;
    http::read(socket, buffer, res, ec);
    EXPECT_FALSE(ec) << ec.message();
    return res;
  }

  asio::io_context io_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, AnswersARequest) {
  HttpRequest seen;
  Start([&seen](HttpRequest request, std::shared_ptr<HttpResponder> responder) {
    seen = request;  // the handler runs before the response is written
    responder->Respond(201, "application/json", "{\"ok\":true}", {{"X-Extra", "yes"}});
  });
  tcp::socket socket = Connect();
  asio::write(socket, asio::buffer(std::string(
                          "POST /v1/things?a=b HTTP/1.1\r\nHost: x\r\nX-Mixed-Case: v\r\n"
                          "Content-Length: 5\r\nConnection: close\r\n\r\nhello")));
  boost::system::error_code ec;
  const std::string r = ReadToEnd(socket, &ec);
  EXPECT_EQ(ec, asio::error::eof);
  EXPECT_THAT(r, StartsWith("HTTP/1.1 201 Created\r\n"));
  EXPECT_THAT(r, HasSubstr("Content-Type: application/json\r\n"));
  EXPECT_THAT(r, HasSubstr("X-Extra: yes\r\n"));
  EXPECT_THAT(r, HasSubstr("Content-Length: 11\r\n"));
  EXPECT_THAT(r, HasSubstr("\r\n\r\n{\"ok\":true}"));
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.target, "/v1/things?a=b");
  EXPECT_EQ(seen.Path(), "/v1/things");
  EXPECT_EQ(seen.version, 11);
  EXPECT_EQ(seen.body, "hello");
  EXPECT_EQ(seen.Header("x-mixed-case").value_or(""), "v");
  EXPECT_EQ(seen.Header("X-MIXED-CASE").value_or(""), "v");
  EXPECT_FALSE(seen.Header("absent").has_value());
  EXPECT_THAT(seen.peer, StartsWith("127.0.0.1:"));
}

TEST_F(HttpServerTest, KeepAliveServesTwoRequestsOnOneConnection) {
  StartEcho();
  tcp::socket socket = Connect();
  boost::beast::flat_buffer buffer;
  asio::write(socket, asio::buffer(std::string("GET /one HTTP/1.1\r\nHost: x\r\n\r\n")));
  auto first = ReadResponse(socket, buffer);
  EXPECT_EQ(first.result_int(), 200);
  EXPECT_EQ(first.body(), "GET /one ");
  EXPECT_TRUE(first.keep_alive());
  asio::write(socket, asio::buffer(std::string("GET /two HTTP/1.1\r\nHost: x\r\n\r\n")));
  auto second = ReadResponse(socket, buffer);
  EXPECT_EQ(second.body(), "GET /two ");
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  StartEcho();
  tcp::socket socket = Connect();
  asio::write(socket, asio::buffer(std::string("GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n")));
  boost::beast::flat_buffer buffer;
  EXPECT_EQ(ReadResponse(socket, buffer).body(), "GET /a ");
  EXPECT_EQ(ReadResponse(socket, buffer).body(), "GET /b ");
}

TEST_F(HttpServerTest, ConnectionCloseIsHonoured) {
  StartEcho();
  tcp::socket socket = Connect();
  asio::write(socket, asio::buffer(std::string("GET /x HTTP/1.1\r\nConnection: close\r\n\r\n")));
  boost::system::error_code ec;
  const std::string r = ReadToEnd(socket, &ec);
  EXPECT_EQ(ec, asio::error::eof);
  EXPECT_THAT(r, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(r, HasSubstr("Connection: close\r\n"));
}

TEST_F(HttpServerTest, HandlerCanAskForClose) {
  Start([](HttpRequest, std::shared_ptr<HttpResponder> responder) {
    responder->Respond(200, "text/plain", "bye", {{"Connection", "close"}});
  });
  tcp::socket socket = Connect();
  asio::write(socket, asio::buffer(std::string("GET / HTTP/1.1\r\n\r\n")));
  boost::system::error_code ec;
  EXPECT_THAT(ReadToEnd(socket, &ec), HasSubstr("\r\n\r\nbye"));
  EXPECT_EQ(ec, asio::error::eof);
}

TEST_F(HttpServerTest, HeadSendsTheLengthWithoutTheBody) {
  StartEcho();
  tcp::socket socket = Connect();
  asio::write(socket, asio::buffer(std::string("HEAD /x HTTP/1.1\r\nConnection: close\r\n\r\n")));
  boost::system::error_code ec;
  const std::string r = ReadToEnd(socket, &ec);
  EXPECT_THAT(r, HasSubstr("Content-Length: 8\r\n"));  // "HEAD /x "
  EXPECT_EQ(r.find("\r\n\r\n") + 4, r.size()) << r;
}

TEST_F(HttpServerTest, GarbageIs400AndClosed) {
  StartEcho();
  tcp::socket socket = Connect();
  asio::write(socket, asio::buffer(std::string("hello there\r\n\r\n")));
  boost::system::error_code ec;
  const std::string r = ReadToEnd(socket, &ec);
  EXPECT_THAT(r, StartsWith("HTTP/1.1 400 Bad Request\r\n"));
  EXPECT_THAT(r, HasSubstr("Connection: close\r\n"));
  EXPECT_EQ(ec, asio::error::eof);
}

TEST_F(HttpServerTest, HugeHeadersAre431) {
  StartEcho();
  tcp::socket socket = Connect();
  asio::write(socket,
              asio::buffer("GET / HTTP/1.1\r\nX-Big: " + std::string(8192, 'a') + "\r\n\r\n"));
  boost::system::error_code ec;
  EXPECT_THAT(ReadToEnd(socket, &ec), StartsWith("HTTP/1.1 431 Request Header Fields Too Large"));
  EXPECT_EQ(ec, asio::error::eof);
}

TEST_F(HttpServerTest, HugeBodyIs413) {
  bool called = false;
  Start([&called](HttpRequest, std::shared_ptr<HttpResponder> responder) {
    called = true;
    responder->Respond(200, "text/plain", "");
  });
  tcp::socket socket = Connect();
  asio::write(socket, asio::buffer("POST / HTTP/1.1\r\nContent-Length: 100000\r\n\r\n" +
                                   std::string(4096, 'b')));
  boost::system::error_code ec;
  EXPECT_THAT(ReadToEnd(socket, &ec), StartsWith("HTTP/1.1 413 Payload Too Large"));
  EXPECT_FALSE(called);
}

TEST_F(HttpServerTest, TricklingClientIsClosedAfterTheReadTimeout) {
  StartEcho();
  tcp::socket socket = Connect();
  const absl::Time start = absl::Now();
  // One byte every 50 ms never completes the head within 200 ms; the
  // server must not restart its clock on each byte.
  const std::string head = "GET /slow HTTP/1.1\r\nX-Long-Header-Name: aaaaaaaaaaaaaaaaaaaa\r\n";
  boost::system::error_code ec;
  for (char c : head) {
    asio::write(socket, asio::buffer(&c, 1), ec);
    if (ec) break;
    absl::SleepFor(absl::Milliseconds(50));
    if (absl::Now() - start > absl::Seconds(1)) break;  // long past the timeout
  }
  std::string rest;
  asio::read(socket, asio::dynamic_buffer(rest), ec);
  EXPECT_TRUE(ec == asio::error::eof || ec == asio::error::connection_reset) << ec.message();
  EXPECT_TRUE(rest.empty()) << rest;
  EXPECT_LT(absl::Now() - start, kGenerous);
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionIsClosed) {
  StartEcho();
  tcp::socket socket = Connect();
  boost::beast::flat_buffer buffer;
  asio::write(socket, asio::buffer(std::string("GET / HTTP/1.1\r\n\r\n")));
  EXPECT_EQ(ReadResponse(socket, buffer).result_int(), 200);
  boost::system::error_code ec;
  EXPECT_TRUE(ReadToEnd(socket, &ec).empty());
  EXPECT_EQ(ec, asio::error::eof);
}

TEST_F(HttpServerTest, StreamsChunksWrittenFromAnotherThreadInOrder) {
  std::thread writer;
  Start([&writer](HttpRequest request, std::shared_ptr<HttpResponder> responder) {
    if (request.target != "/stream") {
      responder->Respond(200, "text/plain", "again");
      return;
    }
    writer = std::thread([responder] {
      responder->StartStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
      for (int i = 0; i < 100; ++i) responder->Write("data: " + std::to_string(i) + "\n\n");
      responder->Finish();
    });
  });
  tcp::socket socket = Connect();
  asio::write(socket, asio::buffer(std::string("GET /stream HTTP/1.1\r\n\r\n")));
  boost::beast::flat_buffer buffer;
  auto res = ReadResponse(socket, buffer);
  writer.join();
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_TRUE(res.chunked());
  EXPECT_EQ(res[http::field::content_type], "text/event-stream");
  EXPECT_EQ(res["Cache-Control"], "no-cache");
  std::string want;
  for (int i = 0; i < 100; ++i) want += "data: " + std::to_string(i) + "\n\n";
  EXPECT_EQ(res.body(), want);
  // The stream ended cleanly: the connection serves another request.
  asio::write(socket,
              asio::buffer(std::string("GET /again HTTP/1.1\r\nConnection: close\r\n\r\n")));
  boost::system::error_code ec;
  EXPECT_THAT(ReadToEnd(socket, &ec), HasSubstr("\r\n\r\n"));
}

TEST_F(HttpServerTest, StreamToAnHttp10ClientEndsWithTheClose) {
  Start([](HttpRequest, std::shared_ptr<HttpResponder> responder) {
    responder->StartStream(200, "text/plain");
    responder->Write("a");
    responder->Write("b");
    responder->Finish();
  });
  tcp::socket socket = Connect();
  asio::write(socket, asio::buffer(std::string("GET / HTTP/1.0\r\n\r\n")));
  boost::system::error_code ec;
  const std::string r = ReadToEnd(socket, &ec);
  EXPECT_EQ(ec, asio::error::eof);
  EXPECT_THAT(r, Not(HasSubstr("chunked")));
  EXPECT_EQ(r.substr(r.find("\r\n\r\n") + 4), "ab");
}

TEST_F(HttpServerTest, OnCloseFiresWhenTheClientLeavesMidStream) {
  absl::Notification closed;
  std::shared_ptr<HttpResponder> held;
  absl::Mutex mu;
  Start([&](HttpRequest, std::shared_ptr<HttpResponder> responder) {
    responder->SetOnClose([&closed] { closed.Notify(); });
    responder->StartStream(200, "text/event-stream");
    responder->Write("data: first\n\n");
    absl::MutexLock lock(&mu);
    held = std::move(responder);  // the "generation" goes on
  });
  {
    tcp::socket socket = Connect();
    asio::write(socket, asio::buffer(std::string("GET /stream HTTP/1.1\r\n\r\n")));
    std::string got;
    boost::system::error_code ec;
    asio::read(socket, asio::dynamic_buffer(got), asio::transfer_at_least(1), ec);
    EXPECT_THAT(got, StartsWith("HTTP/1.1 200"));
  }  // the client goes away
  EXPECT_TRUE(closed.WaitForNotificationWithTimeout(kGenerous));
  // Writes after the close are dropped, and dropping the responder is quiet.
  absl::MutexLock lock(&mu);
  held->Write("data: late\n\n");
  held->Finish();
  held.reset();
}

TEST_F(HttpServerTest, OnCloseSetAfterTheCloseRunsAtOnce) {
  absl::Notification closed;
  std::shared_ptr<HttpResponder> held;
  absl::Notification got_request;
  Start([&](HttpRequest, std::shared_ptr<HttpResponder> responder) {
    held = std::move(responder);
    got_request.Notify();
  });
  {
    tcp::socket socket = Connect();
    asio::write(socket, asio::buffer(std::string("GET / HTTP/1.1\r\n\r\n")));
    ASSERT_TRUE(got_request.WaitForNotificationWithTimeout(kGenerous));
  }
  // Wait for the server to notice, then the late registration still fires.
  const absl::Time deadline = absl::Now() + kGenerous;
  std::atomic<int> fired{0};
  while (fired == 0 && absl::Now() < deadline) {
    held->SetOnClose([&fired] { ++fired; });
    if (fired == 0) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(fired, 1);
  held->SetOnClose([&fired] { ++fired; });  // already closed: runs here, now
  EXPECT_EQ(fired, 2);
}

TEST_F(HttpServerTest, DroppedResponderIs500) {
  Start([](HttpRequest, std::shared_ptr<HttpResponder>) {});
  tcp::socket socket = Connect();
  asio::write(socket, asio::buffer(std::string("GET / HTTP/1.1\r\n\r\n")));
  boost::system::error_code ec;
  const std::string r = ReadToEnd(socket, &ec);
  EXPECT_THAT(r, StartsWith("HTTP/1.1 500 Internal Server Error"));
  EXPECT_EQ(ec, asio::error::eof);
}

TEST_F(HttpServerTest, DestructorClosesOpenConnections) {
  absl::Notification closed;
  absl::Notification got_request;
  std::shared_ptr<HttpResponder> held;
  Start([&](HttpRequest, std::shared_ptr<HttpResponder> responder) {
    responder->SetOnClose([&closed] { closed.Notify(); });
    held = std::move(responder);
    got_request.Notify();
  });
  tcp::socket idle = Connect();  // no request yet
  tcp::socket busy = Connect();  // a request in flight
  asio::write(busy, asio::buffer(std::string("GET / HTTP/1.1\r\n\r\n")));
  ASSERT_TRUE(got_request.WaitForNotificationWithTimeout(kGenerous));
  server_.reset();
  EXPECT_TRUE(closed.HasBeenNotified());
  for (tcp::socket* s : {&idle, &busy}) {
    boost::system::error_code ec;
    EXPECT_TRUE(ReadToEnd(*s, &ec).empty());
    EXPECT_TRUE(ec == asio::error::eof || ec == asio::error::connection_reset) << ec.message();
  }
  // A responder that outlives its server drops its calls.
  held->Respond(200, "text/plain", "too late");
  held.reset();
}

TEST(HttpServerStartTest, BadAddressFails) {
  HttpServerOptions o;
  o.listen_address = "not-an-ip:0";
  auto s = HttpServer::Start(
      o, [](HttpRequest, std::shared_ptr<HttpResponder> r) { r->Respond(200, "text/plain", ""); });
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HttpServerStartTest, TakenPortFails) {
  HttpServerOptions o;
  o.listen_address = "127.0.0.1:0";
  auto handler = [](HttpRequest, std::shared_ptr<HttpResponder> r) {
    r->Respond(200, "text/plain", "");
  };
  auto first = HttpServer::Start(o, handler);
  ASSERT_TRUE(first.ok());
  o.listen_address = "127.0.0.1:" + std::to_string((*first)->port());
  EXPECT_EQ(HttpServer::Start(o, handler).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace pdserve
