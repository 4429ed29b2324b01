// The OpenAI-compatible HTTP API against a real cluster (router, prefill and
// decode workers on loopback, the real model, bearer tokens on): the same
// greedy tokens as gRPC Generate, streamed and not; OpenAI's error shapes
// and HTTP codes; clients that disconnect, trickle or flood leave every
// worker with all KV blocks free and the router serving; metrics by API;
// and the official `openai` Python SDK driving it
// (openai_sdk_check.py, from the virtual environment set-up makes).
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/model_card.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "router/router_server.h"
#include "tests/testing/cluster_test_util.h"
#include "tests/testing/file_contents.h"
#include "tests/testing/http_test_client.h"

namespace pdserve::testing {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

constexpr char kToken[] = "sk-test-token";
constexpr char kModelName[] = "SmolLM2-135M-Instruct.Q4_1";
constexpr char kPrompt[] = "What is the capital of France? Answer in one sentence.";
constexpr int kGreedyTokens = 24;

const std::vector<std::pair<std::string, std::string>>& Auth() {
  static const auto* h = new std::vector<std::pair<std::string, std::string>>{
      {"Authorization", absl::StrCat("Bearer ", kToken)}};
  return *h;
}

Json ParseOrNull(const std::string& s) { return Json::parse(s, nullptr, false); }

// OpenAI's error shape, with the status line's code.
void ExpectError(const HttpResult& r, int status, const std::string& type = "") {
  EXPECT_EQ(r.status, status) << r.body;
  Json j = ParseOrNull(r.body);
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  const Json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r.body;
  EXPECT_TRUE(e["type"].is_string()) << r.body;
  EXPECT_TRUE(e.contains("param") && e.contains("code")) << r.body;
  if (!type.empty()) EXPECT_EQ(e["type"], type) << r.body;
}

class OpenAiApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = TestTempDir("openai-api-test");
    std::ofstream(dir + "/tokens") << kToken << "\n";
    LocalClusterOptions o;
    o.prefill = 1;
    o.decode = 1;
    o.extra_router_flags = {"--auth_token_file=" + dir + "/tokens", "--http_read_timeout_ms=1000",
                            "--http_max_body_bytes=262144", "--metrics_port=-1"};
    o.bin_dir = BinDir();
    o.model = RealModelPath();
    o.log_dir = dir;
    auto c = LocalCluster::Start(o);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = c->release();
    ASSERT_TRUE(AwaitReady()) << "the router never answered a request over HTTP";
    auto model = ModelCard::Load(RealModelPath());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = model->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete model_;
  }

  // /ready, then a one-token chat that was prefilled remotely (a prefill
  // worker still warming up would send the first requests down the local
  // path).
  static bool AwaitReady() {
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    while (absl::Now() < deadline) {
      if (!cluster_->CheckAlive().ok()) return false;
      HttpResult r = Post("/v1/chat/completions",
                          R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1})");
      Json j = ParseOrNull(r.body);
      if (r.status == 200 && j.is_object() &&
          !j["placement"]["prefill_worker"].get<std::string>().empty()) {
        return true;
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    return false;
  }

  static HttpResult Post(const std::string& path, const std::string& body,
                         const std::vector<std::pair<std::string, std::string>>& headers = Auth()) {
    return HttpCall(cluster_->http_address(), "POST", path, body, headers);
  }
  static HttpResult Get(const std::string& path,
                        const std::vector<std::pair<std::string, std::string>>& headers = Auth()) {
    return HttpCall(cluster_->http_address(), "GET", path, "", headers);
  }

  // The greedy answer over gRPC: text and token ids.
  static GenerateOutcome GrpcGreedy() {
    auto stub = RouterStub(cluster_->router_address());
    v1::GenerateRequest req = ChatRequest(kPrompt, kGreedyTokens);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto reader = stub->Generate(&ctx, req);
    GenerateOutcome out;
    v1::GenerateResponse msg;
    while (reader->Read(&msg)) {
      if (msg.has_chunk()) {
        out.text += msg.chunk().text();
        out.ids.insert(out.ids.end(), msg.chunk().token_ids().begin(),
                       msg.chunk().token_ids().end());
      }
      if (msg.has_finished()) out.finished = msg.finished();
    }
    out.status = reader->Finish();
    return out;
  }

  static std::string GreedyBody(bool stream, const std::string& extra = "") {
    return absl::StrCat(R"({"model": ")", kModelName, R"(", "messages": [{"role": "user", "content": ")",
                        kPrompt, R"("}], "temperature": 0, "max_tokens": )", kGreedyTokens,
                        stream ? R"(, "stream": true, "stream_options": {"include_usage": true})"
                               : "",
                        extra, "}");
  }

  static LocalCluster* cluster_;
  static ModelCard* model_;
};

LocalCluster* OpenAiApiTest::cluster_ = nullptr;
ModelCard* OpenAiApiTest::model_ = nullptr;

TEST_F(OpenAiApiTest, GreedyChatIsTokenForTokenTheGrpcAnswer) {
  const GenerateOutcome grpc = GrpcGreedy();
  ASSERT_TRUE(grpc.status.ok()) << grpc.status.error_message();
  ASSERT_FALSE(grpc.ids.empty());

  // Unstreamed, with each token's log-probability (which names its bytes).
  HttpResult r = Post("/v1/chat/completions", GreedyBody(false, R"(, "logprobs": true, "top_logprobs": 2)"));
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = ParseOrNull(r.body);
  ASSERT_TRUE(j.is_object()) << r.body;
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], kModelName);
  EXPECT_THAT(j["id"].get<std::string>(), ::testing::StartsWith("chatcmpl-"));
  EXPECT_EQ(j["choices"][0]["message"]["content"], grpc.text);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["usage"]["completion_tokens"], grpc.finished.usage().completion_tokens());
  EXPECT_EQ(j["usage"]["prompt_tokens"], grpc.finished.usage().prompt_tokens());
  EXPECT_TRUE(j["usage"]["prompt_tokens_details"]["cached_tokens"].is_number());
  EXPECT_TRUE(j["timings"]["ttft_ms"].is_number()) << r.body;
  const Json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), grpc.ids.size()) << r.body;
  for (size_t i = 0; i < grpc.ids.size(); ++i) {
    std::string bytes;
    for (const Json& b : content[i]["bytes"]) bytes.push_back(static_cast<char>(b.get<int>()));
    EXPECT_EQ(bytes, model_->tokenizer().TokenBytes(grpc.ids[i])) << "token " << i;
    EXPECT_LE(content[i]["logprob"].get<double>(), 0.0);
    ASSERT_EQ(content[i]["top_logprobs"].size(), 2u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(content[i]["top_logprobs"][0]["token"], content[i]["token"]);
    EXPECT_DOUBLE_EQ(content[i]["top_logprobs"][0]["logprob"].get<double>(),
                     content[i]["logprob"].get<double>());
  }

  // Streamed: deltas add up to the same text; usage comes last, then [DONE].
  HttpResult s = Post("/v1/chat/completions", GreedyBody(true));
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_THAT(s.Header("Content-Type"), HasSubstr("text/event-stream"));
  std::vector<std::string> events = s.Events();
  ASSERT_GE(events.size(), 3u) << s.body;
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  int finish_reasons = 0;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    Json e = ParseOrNull(events[i]);
    ASSERT_TRUE(e.is_object()) << events[i];
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    if (i + 2 == events.size()) {  // the usage chunk
      EXPECT_TRUE(e["choices"].empty());
      EXPECT_EQ(e["usage"]["completion_tokens"], grpc.finished.usage().completion_tokens());
      continue;
    }
    const Json& choice = e["choices"][0];
    if (i == 0) EXPECT_EQ(choice["delta"]["role"], "assistant");
    if (choice["delta"].contains("content")) text += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) ++finish_reasons;
  }
  EXPECT_EQ(text, grpc.text);
  EXPECT_EQ(finish_reasons, 1);
}

TEST_F(OpenAiApiTest, CompletionsTextAndTokenPrompts) {
  HttpResult r = Post("/v1/completions",
                      R"({"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0,
                          "logprobs": 1})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = ParseOrNull(r.body);
  EXPECT_EQ(j["object"], "text_completion");
  const std::string text = j["choices"][0]["text"];
  EXPECT_FALSE(text.empty());
  const Json& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"].size(), lp["token_logprobs"].size());
  EXPECT_EQ(lp["tokens"].size(), lp["text_offset"].size());

  // The same prompt as token ids gives the same text.
  const std::vector<int32_t> ids = model_->tokenizer().EncodePrompt("The capital of France is");
  HttpResult t = Post("/v1/completions",
                      absl::StrCat(R"({"prompt": [)", absl::StrJoin(ids, ","),
                                   R"(], "max_tokens": 8, "temperature": 0})"));
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(ParseOrNull(t.body)["choices"][0]["text"], text);
}

TEST_F(OpenAiApiTest, ErrorsHaveOpenAisShapeAndCodes) {
  ExpectError(Post("/v1/chat/completions", GreedyBody(false), {}), 401, "authentication_error");
  ExpectError(Post("/v1/chat/completions", GreedyBody(false),
                   {{"Authorization", "Bearer wrong"}}),
              401);
  ExpectError(Get("/v1/models", {}), 401);
  ExpectError(Post("/v1/chat/completions", R"({"messages": )"), 400, "invalid_request_error");
  ExpectError(Post("/v1/chat/completions", GreedyBody(false, R"(, "n": 3)")), 400);
  ExpectError(Post("/v1/chat/completions", GreedyBody(false, R"(, "temperature": -1)")), 400);
  ExpectError(Post("/v1/chat/completions", GreedyBody(false, R"(, "max_tokens": "ten")")), 400);
  ExpectError(Post("/v1/chat/completions",
                   R"({"model": "nope", "messages": [{"role": "user", "content": "x"}]})"),
              404);
  ExpectError(Post("/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"\xc3\x28\"}]}"),
              400);
  // Beyond the context (8192 tokens).
  std::string huge;
  for (int i = 0; i < 9000; ++i) huge += "hello ";
  HttpResult too_long = Post("/v1/completions", absl::StrCat(R"({"prompt": ")", huge, R"(", "max_tokens": 4})"));
  ExpectError(too_long, 400);
  ExpectError(Get("/v1/nope"), 404);
  ExpectError(Get("/v1/chat/completions"), 405);
  // Over --http_max_body_bytes: refused before the body is read.
  ExpectError(Post("/v1/completions", std::string(300000, ' ')), 413);
  // A header block over the server's cap.
  ExpectError(Get("/health", {{"X-Flood", std::string(20000, 'a')}}), 431);
  EXPECT_TRUE(PoolsIdle(*cluster_, absl::Seconds(10)));
}

TEST_F(OpenAiApiTest, HealthReadyAndModels) {
  EXPECT_EQ(Get("/health", {}).status, 200);
  EXPECT_EQ(Get("/ready", {}).status, 200);
  HttpResult m = Get("/v1/models");
  ASSERT_EQ(m.status, 200) << m.body;
  Json j = ParseOrNull(m.body);
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], kModelName);
  EXPECT_EQ(Get(absl::StrCat("/v1/models/", kModelName)).status, 200);
  ExpectError(Get("/v1/models/other"), 404);
}

// A client that goes away mid-stream cancels the request on both tiers.
TEST_F(OpenAiApiTest, DisconnectMidStreamFreesEveryBlock) {
  namespace asio = boost::asio;
  const std::string address = cluster_->http_address();
  for (int round = 0; round < 3; ++round) {
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    socket.connect({asio::ip::make_address("127.0.0.1"),
                    static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)))});
    const std::string body = R"({"messages": [{"role": "user", "content": "Tell me a long story."}],
        "max_tokens": 400, "ignore_eos": true, "stream": true})";
    const std::string request =
        absl::StrCat("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ",
                     kToken, "\r\nContent-Type: application/json\r\nContent-Length: ",
                     body.size(), "\r\n\r\n", body);
    asio::write(socket, asio::buffer(request));
    // Read until a few content deltas arrived, then hang up.
    std::string seen;
    char buf[4096];
    while (seen.find("\"content\":\"", seen.find("\"content\":\"") + 1) == std::string::npos ||
           std::count(seen.begin(), seen.end(), '\n') < 12) {
      boost::system::error_code ec;
      const size_t n = socket.read_some(asio::buffer(buf), ec);
      ASSERT_FALSE(ec) << ec.message() << " after: " << seen;
      seen.append(buf, n);
    }
    socket.close();
  }
  EXPECT_TRUE(PoolsIdle(*cluster_, absl::Seconds(20)));
  // And the router still serves.
  EXPECT_EQ(Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 2})").status, 200);
}

// A client that trickles its request is closed within the read timeout.
TEST_F(OpenAiApiTest, TricklingClientIsClosed) {
  namespace asio = boost::asio;
  const std::string address = cluster_->http_address();
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"),
                  static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)))});
  asio::write(socket, asio::buffer(std::string("POST /v1/completions HTTP/1.1\r\nHost: x\r\n")));
  const absl::Time start = absl::Now();
  char buf[256];
  boost::system::error_code ec;
  while (!ec) socket.read_some(asio::buffer(buf), ec);  // until the server closes
  // --http_read_timeout_ms=1000; generous bound, only a hang fails.
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_EQ(Get("/health", {}).status, 200);
}

TEST_F(OpenAiApiTest, MetricsCountRequestsByApi) {
  ASSERT_EQ(Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 2})").status, 200);
  ASSERT_EQ(Post("/v1/completions", R"({"prompt": )").status, 400);
  ASSERT_EQ(Post("/v1/completions", R"({"model": "x", "prompt": "Hi"})").status, 404);
  HttpResult m = HttpCall(absl::StrCat("127.0.0.1:", cluster_->metrics_port("router")), "GET",
                          "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_THAT(m.body, HasSubstr(R"(pdserve_router_requests_total{api="openai",code="OK"})"));
  EXPECT_THAT(m.body, HasSubstr(R"(pdserve_router_ttft_seconds_count{api="openai"})"));
  // Refused by the front itself (never a gRPC call), counted all the same.
  EXPECT_THAT(m.body, ::testing::ContainsRegex(
                          R"(pdserve_router_requests_total\{api="openai",code="INVALID_ARGUMENT"\} [1-9])"));
  EXPECT_THAT(m.body, ::testing::ContainsRegex(
                          R"(pdserve_router_requests_total\{api="openai",code="NOT_FOUND"\} [1-9])"));
}

// The official SDK (tests/integration/openai_sdk_check.py), in the virtual
// environment set-up made; PDSERVE_OPENAI_PYTHON names its interpreter.
TEST_F(OpenAiApiTest, OfficialPythonSdk) {
  const char* python = std::getenv("PDSERVE_OPENAI_PYTHON");
  if (python == nullptr || *python == '\0') {
    GTEST_SKIP() << "PDSERVE_OPENAI_PYTHON is not set (the release build's ctest sets it)";
  }
  const GenerateOutcome grpc = GrpcGreedy();
  ASSERT_TRUE(grpc.status.ok());
  const std::string dir = TestTempDir("openai-api-test");
  std::ofstream(dir + "/greedy.txt") << grpc.text;
  const std::string cmd = absl::StrCat(
      python, " ", SourceDir(), "/tests/integration/openai_sdk_check.py --base-url http://",
      cluster_->http_address(), "/v1 --api-key ", kToken, " --model ", kModelName,
      " --expect-greedy-text-file ", dir, "/greedy.txt --expect-greedy-prompt '", kPrompt,
      "' --greedy-max-tokens ", kGreedyTokens, " > ", dir, "/sdk.log 2>&1");
  const int rc = std::system(cmd.c_str());
  const std::string out = testing::FileContents(dir + "/sdk.log");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(PoolsIdle(*cluster_, absl::Seconds(20)));
}

// A router with no live decode worker: not ready, and a request is a 503
// the client may retry.
TEST(OpenAiApiNoWorkerTest, NotReadyAndRetryable) {
  router::RouterConfig config;
  config.listen = "127.0.0.1:0";
  config.http_listen = "127.0.0.1:0";
  config.model_path = RealModelPath();
  config.decode_addresses = {"127.0.0.1:1"};  // nothing listens there
  config.failover_wait_ms = 0;
  auto server = router::RouterServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string http = absl::StrCat("127.0.0.1:", (*server)->http_port());
  EXPECT_EQ(HttpCall(http, "GET", "/health").status, 200);
  ExpectError(HttpCall(http, "GET", "/ready"), 503, "service_unavailable");
  HttpResult r = HttpCall(http, "POST", "/v1/chat/completions",
                          R"({"messages": [{"role": "user", "content": "Hi"}]})");
  ExpectError(r, 503, "service_unavailable");
  EXPECT_EQ(r.Header("Retry-After"), "1");
  (*server)->Shutdown(absl::ZeroDuration());
}

}  // namespace
}  // namespace pdserve::testing
