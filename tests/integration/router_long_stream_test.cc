// A healthy stream is never cut by the router's own clock: with the
// default flags a stream of three minutes completes, over gRPC without a
// client deadline and over the OpenAI HTTP API (whose clients have none).
// The real router in process, a fake decode worker pacing one token a
// second. Label soak: it takes three minutes of wall time (idle, no CPU).
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/model/model_card.h"
#include "common/model/random_model.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pdserve/v1/generation.grpc.pb.h"
#include "router/router_server.h"
#include "tests/testing/fake_workers.h"
#include "tests/testing/http_test_client.h"
#include "tests/testing/temp_dir.h"

namespace pdserve::router {
namespace {

// Past the 120 s the router used to cut every stream at by default.
constexpr int kTokens = 181;
const absl::Duration kTokenDelay = absl::Seconds(1);

TEST(RouterLongStreamTest, AThreeMinuteStreamCompletesWithTheDefaultFlags) {
  const std::string model_path = testing::TestTempDir("router-long-stream-test") + "/model.gguf";
  ASSERT_TRUE(WriteRandomModelGguf(RandomModelSpec{}, model_path).ok());
  absl::StatusOr<std::unique_ptr<ModelCard>> model = ModelCard::Load(model_path);
  ASSERT_TRUE(model.ok()) << model.status();

  test::FakeKvBus bus;
  test::FakeDecodeWorker::Options o;
  o.fingerprint = (*model)->fingerprint();
  o.output.assign(kTokens, (*model)->tokenizer().Encode("a", /*parse_special=*/false).front());
  o.token_delay = kTokenDelay;
  test::FakeDecodeWorker decode(o, &bus);

  RouterConfig config;  // the defaults, --request_timeout_ms among them
  config.listen = "127.0.0.1:0";
  config.http_listen = "127.0.0.1:0";
  config.model_path = model_path;
  config.decode_addresses = {decode.address()};
  auto router = RouterServer::Start(config);
  ASSERT_TRUE(router.ok()) << router.status();
  while (!(*router)->registry().snapshot()->decode.front().live) {
    absl::SleepFor(absl::Milliseconds(10));
  }

  // gRPC, no client deadline.
  int grpc_tokens = 0;
  std::string grpc_text;
  grpc::Status grpc_status;
  std::thread grpc_client([&] {
    auto stub = v1::Generation::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", (*router)->port()), grpc::InsecureChannelCredentials()));
    v1::GenerateRequest r;
    r.set_text("go");
    r.set_max_tokens(kTokens + 10);
    r.set_return_token_ids(true);
    grpc::ClientContext ctx;
    auto reader = stub->Generate(&ctx, r);
    v1::GenerateResponse msg;
    while (reader->Read(&msg)) {
      if (!msg.has_chunk()) continue;
      grpc_tokens += msg.chunk().token_ids_size();
      grpc_text += msg.chunk().text();
    }
    grpc_status = reader->Finish();
  });
  // HTTP, streamed.
  const absl::Time start = absl::Now();
  const testing::HttpResult http = testing::HttpCall(
      absl::StrCat("127.0.0.1:", (*router)->http_port()), "POST", "/v1/completions",
      nlohmann::json{{"prompt", "go"}, {"max_tokens", kTokens + 10}, {"stream", true}}.dump());
  const absl::Duration took = absl::Now() - start;
  grpc_client.join();

  EXPECT_GE(took, kTokenDelay * (kTokens - 1));  // it did take three minutes
  EXPECT_TRUE(grpc_status.ok()) << grpc_status.error_code() << " " << grpc_status.error_message();
  EXPECT_EQ(grpc_tokens, kTokens);
  ASSERT_EQ(http.status, 200);
  std::string text;
  std::string finish_reason;
  for (const std::string& e : http.Events()) {
    if (e == "[DONE]") continue;
    const nlohmann::json j = nlohmann::json::parse(e);
    ASSERT_FALSE(j.contains("error")) << e;
    if (j["choices"].empty()) continue;
    if (j["choices"][0]["text"].is_string()) text += j["choices"][0]["text"].get<std::string>();
    if (j["choices"][0]["finish_reason"].is_string())
      finish_reason = j["choices"][0]["finish_reason"];
  }
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text, grpc_text);  // the same 181 tokens
  EXPECT_NE(http.body.find("data: [DONE]"), std::string::npos);
  EXPECT_FALSE(finish_reason.empty());
}

}  // namespace
}  // namespace pdserve::router
