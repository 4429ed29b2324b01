// The pieces `pdserve bench` uses to load servers other than the router:
// the SSE event parser, the OpenAI-compatible target against a scripted
// in-process HTTP server (token accounting, HTTP errors, cut streams), and
// text prompts whose recorded length is what the text really encodes to.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "tests/testing/tokenizer_test_util.h"
#include "tools/bench/bench_client.h"
#include "tools/bench/openai_target.h"
#include "tools/bench/prompt_text.h"
#include "tools/bench/sse_event_parser.h"

namespace pdserve {
namespace {

std::string Chunked(const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) absl::StrAppend(&out, absl::Hex(p.size()), "\r\n", p, "\r\n");
  return out + "0\r\n\r\n";
}

constexpr char kSseHead[] =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

TEST(SseEventParserTest, EventsFedByteByByte) {
  const std::string body = "data: one\r\n\r\n: ping\r\n\r\ndata: two\r\ndata: lines\r\n\r\n"
                           "event: x\ndata:[DONE]\n\n";
  SseEventParser parser;
  std::vector<std::string> events;
  for (char c : body) parser.Feed(std::string(1, c), &events);
  EXPECT_EQ(events, (std::vector<std::string>{"one", "two\nlines", "[DONE]"}));
}

TEST(SseEventParserTest, AnIncompleteEventWaits) {
  SseEventParser parser;
  std::vector<std::string> events;
  parser.Feed("data: a\n\ndata: b\n", &events);
  EXPECT_EQ(events, (std::vector<std::string>{"a"}));
  parser.Feed("\n", &events);
  EXPECT_EQ(events, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(parser.body(), "data: a\n\ndata: b\n\n");
}

// Accepts connections on loopback and answers each with `reply`, after
// reading the request (so the client's send never fails).
class ScriptedHttpServer {
 public:
  explicit ScriptedHttpServer(std::vector<std::string> reply_parts) : parts_(std::move(reply_parts)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedHttpServer() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  std::string last_request() const { return last_request_; }

 private:
  void Serve() {
    while (true) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string req;
      char buf[4096];
      // Headers then Content-Length bytes of body.
      while (req.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        req.append(buf, n);
      }
      const size_t cl = req.find("Content-Length: ");
      const size_t body_at = req.find("\r\n\r\n") + 4;
      const size_t want = cl == std::string::npos ? 0 : std::stoul(req.substr(cl + 16));
      while (req.size() < body_at + want) {
        const ssize_t n = recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        req.append(buf, n);
      }
      last_request_ = req;
      for (const std::string& p : parts_) {
        send(c, p.data(), p.size(), MSG_NOSIGNAL);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      close(c);
    }
  }

  std::vector<std::string> parts_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::string last_request_;
};

std::string Event(const std::string& text, const std::string& finish = "") {
  const std::string reason = finish.empty() ? "null" : absl::StrCat("\"", finish, "\"");
  return absl::StrCat("data: {\"choices\":[{\"text\":\"", text, "\",\"finish_reason\":", reason,
                      "}]}\r\n\r\n");
}

// Runs one request of `max_tokens` through an OpenAiTarget: a text prompt,
// or `messages` when given.
RequestRecord RunOne(const std::string& address, int max_tokens, bool ignore_eos = false,
                     std::vector<ChatMessage> messages = {}) {
  absl::StatusOr<std::unique_ptr<OpenAiTarget>> target = OpenAiTarget::Create(address, {0, 2});
  EXPECT_TRUE(target.ok()) << target.status();
  BenchRequestSpec spec;
  if (messages.empty()) spec.text = "hello";
  spec.messages = std::move(messages);
  spec.max_tokens = max_tokens;
  spec.ignore_eos = ignore_eos;
  spec.timeout = absl::Seconds(30);
  RequestRecord record;
  record.requested_output_tokens = max_tokens;
  absl::Notification done;
  RequestRecord out;
  (*target)->Start(spec, record, BenchClock::now(), [&](RequestRecord r, BenchClock::time_point) {
    out = std::move(r);
    done.Notify();
  });
  done.WaitForNotification();
  (*target)->Quiesce();
  return out;
}

TEST(OpenAiTargetTest, CountsTokensAndCreditsHeldBackOnesOnLength) {
  // Four events with text but five tokens generated: one event merged two.
  ScriptedHttpServer server({kSseHead, Chunked({Event("a"), Event("b"), Event("cd"), Event("e"),
                                      Event("", "length"), "data: [DONE]\r\n\r\n"})});
  const RequestRecord r = RunOne(server.address(), 5, /*ignore_eos=*/true);
  EXPECT_EQ(r.code, absl::StatusCode::kOk) << r.error;
  EXPECT_EQ(r.chunks.size(), 4u);
  EXPECT_EQ(OutputTokens(r), 5);
  EXPECT_GT(r.e2e_ms, 0);
  EXPECT_NE(server.last_request().find("\"logit_bias\":{\"0\":-100.0,\"2\":-100.0}"),
            std::string::npos)
      << server.last_request();
  EXPECT_NE(server.last_request().find("\"ignore_eos\":true"), std::string::npos)
      << server.last_request();
}

std::string ChatEvent(const std::string& delta, const std::string& finish = "") {
  const std::string reason = finish.empty() ? "null" : absl::StrCat("\"", finish, "\"");
  return absl::StrCat("data: {\"choices\":[{\"index\":0,\"delta\":", delta,
                      ",\"finish_reason\":", reason, "}]}\r\n\r\n");
}

TEST(OpenAiTargetTest, ConversationsGoToChatCompletionsAndUsageCounts) {
  // A role-only first delta (no token), three content events carrying four
  // tokens, the finish, then the usage event with no choices.
  ScriptedHttpServer server(
      {kSseHead,
       Chunked({ChatEvent(R"({"role":"assistant"})"), ChatEvent(R"({"content":"a"})"),
                ChatEvent(R"({"content":"bc"})"), ChatEvent(R"({"content":"d"})"),
                ChatEvent("{}", "stop"),
                "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":37,"
                "\"completion_tokens\":4,\"total_tokens\":41}}\r\n\r\n",
                "data: [DONE]\r\n\r\n"})});
  const RequestRecord r = RunOne(server.address(), 16, false,
                                 {{"user", "hi"}, {"assistant", "hello"}, {"user", "again"}});
  EXPECT_EQ(r.code, absl::StatusCode::kOk) << r.error;
  EXPECT_EQ(r.chunks.size(), 3u);
  EXPECT_EQ(OutputTokens(r), 4);
  EXPECT_EQ(r.input_tokens, 37);
  const std::string req = server.last_request();
  EXPECT_EQ(req.rfind("POST /v1/chat/completions ", 0), 0u) << req;
  EXPECT_NE(req.find(R"("messages":[{"content":"hi","role":"user"},{"content":"hello","role":"assistant"})"),
            std::string::npos)
      << req;
  EXPECT_NE(req.find(R"("include_usage":true)"), std::string::npos) << req;
  EXPECT_EQ(req.find(R"("prompt")"), std::string::npos) << req;
}

TEST(OpenAiTargetTest, ErrorEventAfterTheHeadIsTheStatus) {
  // pdserve's (and vLLM's) way to fail a stream whose 200 already went out.
  ScriptedHttpServer server(
      {kSseHead, Chunked({Event("a"), "data: {\"error\":{\"message\":\"kv cache: need 104 blocks\","
                                      "\"type\":\"rate_limit_error\",\"code\":\"rate_limit_exceeded\"}}\r\n\r\n"})});
  const RequestRecord r = RunOne(server.address(), 4);
  EXPECT_EQ(r.code, absl::StatusCode::kResourceExhausted) << r.error;
  EXPECT_NE(r.error.find("need 104 blocks"), std::string::npos) << r.error;
  // A malformed one (fields of the wrong type) is still an error, not a crash.
  ScriptedHttpServer odd({kSseHead, Chunked({"data: {\"error\":{\"message\":7,\"type\":[1]}}\r\n\r\n"})});
  const RequestRecord o = RunOne(odd.address(), 4);
  EXPECT_EQ(o.code, absl::StatusCode::kUnavailable) << o.error;
  EXPECT_NE(o.error.find("without a message"), std::string::npos) << o.error;
}

TEST(OpenAiTargetTest, UnchunkedBodyUntilClose) {
  ScriptedHttpServer server({"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n",
                             Event("a"), Event("b", "length")});
  const RequestRecord r = RunOne(server.address(), 2);
  EXPECT_EQ(r.code, absl::StatusCode::kOk) << r.error;
  EXPECT_EQ(OutputTokens(r), 2);
}

TEST(OpenAiTargetTest, GarbageIsAnError) {
  ScriptedHttpServer server({"SSH-2.0-OpenSSH\r\n\r\n"});
  EXPECT_NE(RunOne(server.address(), 2).code, absl::StatusCode::kOk);
  ScriptedHttpServer bad_chunk({kSseHead, "zz\r\n"});
  EXPECT_NE(RunOne(bad_chunk.address(), 2).code, absl::StatusCode::kOk);
}

TEST(OpenAiTargetTest, StopFinishIsNotPadded) {
  ScriptedHttpServer server({kSseHead, Chunked({Event("a"), Event("b", "stop")})});
  const RequestRecord r = RunOne(server.address(), 8);
  EXPECT_EQ(r.code, absl::StatusCode::kOk) << r.error;
  EXPECT_EQ(OutputTokens(r), 2);
}

TEST(OpenAiTargetTest, HttpErrorBecomesStatus) {
  ScriptedHttpServer server(
      {"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 11\r\n\r\n{\"busy\":1}\n"});
  const RequestRecord r = RunOne(server.address(), 4);
  EXPECT_EQ(r.code, absl::StatusCode::kUnavailable);
  EXPECT_NE(r.error.find("busy"), std::string::npos) << r.error;
}

TEST(OpenAiTargetTest, CutStreamIsAnError) {
  ScriptedHttpServer server({kSseHead, "6\r\n" + Event("a").substr(0, 6) + "\r\n"});
  const RequestRecord r = RunOne(server.address(), 4);
  EXPECT_EQ(r.code, absl::StatusCode::kUnavailable) << r.error;
}

TEST(OpenAiTargetTest, RefusesTokenIdPrompts) {
  ScriptedHttpServer server({kSseHead});
  absl::StatusOr<std::unique_ptr<OpenAiTarget>> target = OpenAiTarget::Create(server.address(), {});
  ASSERT_TRUE(target.ok());
  BenchRequestSpec spec;  // no text
  spec.prompt = {1, 2, 3};
  absl::Notification done;
  absl::StatusCode code = absl::StatusCode::kOk;
  (*target)->Start(spec, RequestRecord{}, BenchClock::now(),
                   [&](RequestRecord r, BenchClock::time_point) {
                     code = r.code;
                     done.Notify();
                   });
  done.WaitForNotification();
  EXPECT_EQ(code, absl::StatusCode::kInvalidArgument);
}

TEST(PromptTextTest, RecordedIdsAreWhatTheTextEncodesTo) {
  using tokenizer_test::ByteVocab;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      Tokenizer::FromVocab(ByteVocab({{"a", "b"}, {"ab", "c"}, {" ", "x"}}));
  ASSERT_TRUE(tok.ok()) << tok.status();
  const Tokenizer* raw = tok->get();
  PromptText text(std::shared_ptr<const Tokenizer>(std::move(*tok)));
  // "a" "b" "c" as separate ids merge into one token when re-encoded.
  const std::vector<int32_t> ids = {'a', 'b', 'c', ' ', 'x', 'q'};
  std::vector<int32_t> encoded;
  const std::string s = text.Render(ids, &encoded);
  EXPECT_EQ(s, "abc xq");
  EXPECT_LE(encoded.size(), ids.size());
  EXPECT_EQ(encoded, raw->Encode(s, false));
  EXPECT_EQ(text.vocab_size(), raw->vocab_size());
}

TEST(PromptTextTest, TextIsAlwaysWellFormedUtf8) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromVocab(tokenizer_test::ByteVocab());
  ASSERT_TRUE(tok.ok()) << tok.status();
  PromptText text(std::shared_ptr<const Tokenizer>(std::move(*tok)));
  // 0xE2 0x82 opens a 3-byte character that never ends; 0xFF is never valid.
  std::vector<int32_t> encoded;
  const std::string s = text.Render({'a', 0xE2, 0x82, 'b', 0xFF, 0xC3, 0xA9}, &encoded);
  EXPECT_EQ(s, "ab\xC3\xA9");
  EXPECT_EQ(encoded.size(), 4u);  // a, b and the two bytes of é
}

}  // namespace
}  // namespace pdserve
