// OpenAiResponse: the documents OpenAI's clients parse, built from a
// Generate stream (Started, Chunk..., Finished) on a random model's
// vocabulary.
#include "router/api/openai/openai_response.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/model/model_card.h"
#include "common/model/random_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/temp_dir.h"

namespace pdserve::router::openai {
namespace {

using Json = nlohmann::json;
using ::testing::StartsWith;

class OpenAiResponseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = pdserve::testing::TestTempDir("openai-response-test") + "/m.gguf";
    ASSERT_TRUE(WriteRandomModelGguf(RandomModelSpec(), path).ok());
    auto model = ModelCard::Load(path);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model).release();
  }
  static void TearDownTestSuite() { delete model_; }

  static OpenAiResponse Make(Endpoint endpoint, int32_t logprobs = -1, bool usage = false,
                             std::vector<std::string> tools = {}) {
    OpenAiResponse r(model_->tokenizer(), {.endpoint = endpoint,
                                           .model = "m",
                                           .created = 1700000000,
                                           .logprobs = logprobs,
                                           .include_usage = usage,
                                           .tools = std::move(tools)});
    v1::Started started;
    started.set_request_id("abc");
    r.Start(started);
    return r;
  }

  static v1::Chunk Chunk(const std::string& text, std::vector<int32_t> ids = {}) {
    v1::Chunk c;
    c.set_text(text);
    for (int32_t id : ids) {
      c.add_token_ids(id);
      v1::TokenLogprobs* lp = c.add_logprobs();
      lp->set_token(id);
      lp->set_logprob(-0.5f);
      v1::TopLogprob* top = lp->add_top();
      top->set_token(id);
      top->set_logprob(-0.5f);
    }
    return c;
  }

  static v1::Finished Finished(v1::FinishReason reason) {
    v1::Finished f;
    f.set_reason(reason);
    f.mutable_usage()->set_prompt_tokens(5);
    f.mutable_usage()->set_completion_tokens(2);
    f.mutable_usage()->set_cached_prompt_tokens(4);
    f.mutable_timings()->set_ttft_ms(12.5);
    return f;
  }

  // The JSON of each `data:` event, [DONE] as a string.
  static std::vector<Json> Events(const std::string& sse) {
    std::vector<Json> out;
    for (absl::string_view block : absl::StrSplit(sse, "\n\n", absl::SkipEmpty())) {
      EXPECT_TRUE(absl::ConsumePrefix(&block, "data: ")) << block;
      out.push_back(block == "[DONE]" ? Json("[DONE]") : Json::parse(block));
    }
    return out;
  }

  static ModelCard* model_;
};

ModelCard* OpenAiResponseTest::model_ = nullptr;

TEST_F(OpenAiResponseTest, WholeChatCompletion) {
  OpenAiResponse r = Make(Endpoint::kChatCompletions);
  r.Append(Chunk("Hel"));
  r.Append(Chunk("lo"));
  Json doc = Json::parse(r.Whole(Finished(v1::FINISH_REASON_EOS)));
  EXPECT_EQ(doc["id"], "chatcmpl-abc");
  EXPECT_EQ(doc["object"], "chat.completion");
  EXPECT_EQ(doc["created"], 1700000000);
  EXPECT_EQ(doc["model"], "m");
  const Json& choice = doc["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_EQ(choice["message"]["content"], "Hello");
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_TRUE(choice["logprobs"].is_null());
  EXPECT_EQ(doc["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(doc["usage"]["completion_tokens"], 2);
  EXPECT_EQ(doc["usage"]["total_tokens"], 7);
  EXPECT_EQ(doc["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  EXPECT_DOUBLE_EQ(doc["timings"]["ttft_ms"].get<double>(), 12.5);
}

TEST_F(OpenAiResponseTest, StreamedChatWithUsage) {
  OpenAiResponse r = Make(Endpoint::kChatCompletions, -1, /*usage=*/true);
  std::string sse = r.StreamStart() + r.StreamChunk(Chunk("Hi")) + r.StreamChunk(Chunk("")) +
                    r.StreamEnd(Finished(v1::FINISH_REASON_LENGTH));
  std::vector<Json> events = Events(sse);
  ASSERT_EQ(events.size(), 5u);  // role, "Hi", finish, usage, [DONE] (empty chunk skipped)
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events[1]["choices"][0]["delta"]["content"], "Hi");
  EXPECT_TRUE(events[1]["usage"].is_null());
  EXPECT_TRUE(events[1]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(events[2]["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(events[3]["choices"].empty());
  EXPECT_EQ(events[3]["usage"]["total_tokens"], 7);
  EXPECT_EQ(events[4], "[DONE]");
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(events[i]["object"], "chat.completion.chunk");
    EXPECT_EQ(events[i]["id"], "chatcmpl-abc");
  }
}

TEST_F(OpenAiResponseTest, CompletionsWithLogprobs) {
  OpenAiResponse r = Make(Endpoint::kCompletions, /*logprobs=*/1);
  const std::string a = model_->tokenizer().TokenBytes(40);
  const std::string b = model_->tokenizer().TokenBytes(41);
  r.Append(Chunk(a + b, {40, 41}));
  Json doc = Json::parse(r.Whole(Finished(v1::FINISH_REASON_LENGTH)));
  EXPECT_THAT(doc["id"].get<std::string>(), StartsWith("cmpl-"));
  EXPECT_EQ(doc["object"], "text_completion");
  const Json& lp = doc["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 2u);
  EXPECT_EQ(lp["tokens"][1], b);
  EXPECT_FLOAT_EQ(lp["token_logprobs"][0].get<float>(), -0.5f);
  EXPECT_EQ(lp["text_offset"][0], 0);
  EXPECT_EQ(lp["text_offset"][1], static_cast<int>(a.size()));
  EXPECT_EQ(lp["top_logprobs"][0].size(), 1u);
  EXPECT_EQ(doc["choices"][0]["finish_reason"], "length");
}

TEST_F(OpenAiResponseTest, StreamedChatLogprobsCarryBytes) {
  OpenAiResponse r = Make(Endpoint::kChatCompletions, /*logprobs=*/1);
  std::vector<Json> events = Events(r.StreamChunk(Chunk("x", {42})));
  ASSERT_EQ(events.size(), 1u);
  const Json& entry = events[0]["choices"][0]["logprobs"]["content"][0];
  std::string bytes;
  for (const Json& b : entry["bytes"]) bytes.push_back(static_cast<char>(b.get<int>()));
  EXPECT_EQ(bytes, model_->tokenizer().TokenBytes(42));
  EXPECT_EQ(entry["top_logprobs"].size(), 1u);
}

constexpr char kCall[] =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

TEST_F(OpenAiResponseTest, WholeChatWithToolCalls) {
  OpenAiResponse r = Make(Endpoint::kChatCompletions, -1, false, {"get_weather"});
  r.Append(Chunk(std::string(kCall).substr(0, 20)));
  r.Append(Chunk(std::string(kCall).substr(20)));
  Json doc = Json::parse(r.Whole(Finished(v1::FINISH_REASON_STOP)));
  const Json& choice = doc["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const Json& call = choice["message"]["tool_calls"][0];
  EXPECT_THAT(call["id"].get<std::string>(), StartsWith("call_"));
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(call["function"]["arguments"].get<std::string>()),
            Json::parse(R"({"city": "Paris"})"));
  // Cut by max_tokens: the unfinished call is text, the reason is length.
  OpenAiResponse cut = Make(Endpoint::kChatCompletions, -1, false, {"get_weather"});
  cut.Append(Chunk("<tool_call>\n{\"name\": "));
  doc = Json::parse(cut.Whole(Finished(v1::FINISH_REASON_LENGTH)));
  EXPECT_EQ(doc["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(doc["choices"][0]["message"]["content"], "<tool_call>\n{\"name\": ");
  EXPECT_FALSE(doc["choices"][0]["message"].contains("tool_calls"));
  // Without tools, the same text is content.
  OpenAiResponse plain = Make(Endpoint::kChatCompletions);
  plain.Append(Chunk(kCall));
  doc = Json::parse(plain.Whole(Finished(v1::FINISH_REASON_STOP)));
  EXPECT_EQ(doc["choices"][0]["message"]["content"], kCall);
  EXPECT_EQ(doc["choices"][0]["finish_reason"], "stop");
}

TEST_F(OpenAiResponseTest, StreamedToolCallDeltas) {
  OpenAiResponse r = Make(Endpoint::kChatCompletions, -1, false, {"get_weather"});
  std::string sse = r.StreamStart();
  const std::string text = absl::StrCat("Checking.\n", kCall, "\n", kCall);
  for (size_t i = 0; i < text.size(); i += 9) sse += r.StreamChunk(Chunk(text.substr(i, 9)));
  sse += r.StreamEnd(Finished(v1::FINISH_REASON_STOP));
  std::string content;
  std::vector<Json> calls;
  std::string finish;
  for (const Json& e : Events(sse)) {
    if (e == "[DONE]") continue;
    const Json& choice = e["choices"][0];
    if (choice["finish_reason"].is_string()) finish = choice["finish_reason"];
    const Json& delta = choice["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) {
      for (const Json& c : delta["tool_calls"]) calls.push_back(c);
    }
  }
  EXPECT_EQ(content, "Checking.");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[1]["index"], 1);
  EXPECT_EQ(calls[1]["function"]["name"], "get_weather");
  EXPECT_NE(calls[0]["id"], calls[1]["id"]);
  EXPECT_EQ(finish, "tool_calls");
}

}  // namespace
}  // namespace pdserve::router::openai
