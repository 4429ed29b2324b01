// ParseOpenAiRequest: what the HTTP front refuses itself (with the field at
// fault), and how it maps OpenAI's fields and defaults onto Generate.
#include "router/api/openai/openai_request.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "router/api/openai/openai_error.h"

namespace pdserve::router::openai {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<OpenAiRequest> Chat(const std::string& body) {
  return ParseOpenAiRequest(Endpoint::kChatCompletions, body);
}
absl::StatusOr<OpenAiRequest> Completion(const std::string& body) {
  return ParseOpenAiRequest(Endpoint::kCompletions, body);
}

// The param an error names ("" for null).
std::string ParamOf(const absl::StatusOr<OpenAiRequest>& r) {
  EXPECT_FALSE(r.ok());
  return FromParseStatus(r.status()).param;
}

constexpr char kHello[] = R"("messages": [{"role": "user", "content": "Hello"}])";

TEST(OpenAiRequestTest, ChatMapsMessagesAndOpenAiDefaults) {
  auto r = Chat(absl::StrCat(
      R"({"model": "m", "messages": [{"role": "developer", "content": "Be brief."},)",
      R"({"role": "user", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]},)",
      R"({"role": "assistant", "content": null}, {"role": "tool", "content": "42"}]})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "m");
  const v1::ChatInput& chat = r->generate.chat();
  ASSERT_EQ(chat.messages_size(), 4);
  EXPECT_EQ(chat.messages(0).role(), "system");
  EXPECT_EQ(chat.messages(1).content(), "Hello");
  EXPECT_EQ(chat.messages(2).content(), "");
  EXPECT_EQ(chat.messages(3).role(), "tool");
  // OpenAI's defaults, not the gRPC API's.
  EXPECT_FLOAT_EQ(r->generate.sampling().temperature(), 1.0f);
  EXPECT_EQ(r->generate.max_tokens(), 0);
  EXPECT_TRUE(r->generate.max_tokens_until_context());
  EXPECT_FALSE(r->generate.sampling().has_seed());
  EXPECT_FALSE(r->stream);
  EXPECT_EQ(r->logprobs, -1);
}

TEST(OpenAiRequestTest, SamplingFieldsAndExtensions) {
  auto r = Chat(absl::StrCat("{", kHello, R"(, "temperature": 0, "top_p": 0.9, "seed": -1,
      "presence_penalty": 0.5, "frequency_penalty": -0.5, "top_k": -1, "min_p": 0.05,
      "repetition_penalty": 1.1, "ignore_eos": true, "stop": "\n\n", "user": "u-1",
      "max_completion_tokens": 7, "max_tokens": 99, "some_future_field": {"x": [1]},
      "speculative": false})"));
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::SamplingParams& s = r->generate.sampling();
  EXPECT_EQ(s.temperature(), 0.0f);
  EXPECT_FLOAT_EQ(s.top_p(), 0.9f);
  EXPECT_EQ(s.seed(), ~uint64_t{0});
  EXPECT_FLOAT_EQ(s.presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty(), -0.5f);
  EXPECT_EQ(s.top_k(), 0);  // vLLM's -1 = off
  EXPECT_FLOAT_EQ(s.min_p(), 0.05f);
  EXPECT_FLOAT_EQ(s.repetition_penalty(), 1.1f);
  EXPECT_TRUE(r->generate.ignore_eos());
  ASSERT_EQ(r->generate.stop_size(), 1);
  EXPECT_EQ(r->generate.stop(0), "\n\n");
  EXPECT_EQ(r->generate.max_tokens(), 7);  // max_completion_tokens wins
  ASSERT_TRUE(s.has_speculative());
  EXPECT_FALSE(s.speculative());
  // Unsaid, the decode worker's default applies.
  auto plain = Chat(absl::StrCat("{", kHello, "}"));
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->generate.sampling().has_speculative());
}

TEST(OpenAiRequestTest, CompletionPrompts) {
  auto text = Completion(R"({"prompt": "Once upon"})");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->generate.text(), "Once upon");
  EXPECT_EQ(text->generate.max_tokens(), 16);  // OpenAI's completions default
  EXPECT_FALSE(text->generate.max_tokens_until_context());

  auto ids = Completion(R"({"prompt": [1, 2, 3], "max_tokens": 4.0})");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->generate.tokens().ids_size(), 3);
  EXPECT_EQ(ids->generate.max_tokens(), 4);

  auto batch_of_one = Completion(R"({"prompt": [[5, 6]]})");
  ASSERT_TRUE(batch_of_one.ok()) << batch_of_one.status();
  EXPECT_EQ(batch_of_one->generate.tokens().ids_size(), 2);
  auto text_of_one = Completion(R"({"prompt": ["x"]})");
  ASSERT_TRUE(text_of_one.ok());
  EXPECT_EQ(text_of_one->generate.text(), "x");

  EXPECT_EQ(ParamOf(Completion(R"({"prompt": ["a", "b"]})")), "prompt");
  EXPECT_EQ(ParamOf(Completion(R"({"prompt": [1, "b"]})")), "prompt[1]");
  EXPECT_EQ(ParamOf(Completion(R"({"prompt": [1.5]})")), "prompt[0]");
  EXPECT_EQ(ParamOf(Completion(R"({"prompt": 3})")), "prompt");
  EXPECT_EQ(ParamOf(Completion(R"({"max_tokens": 3})")), "prompt");
}

TEST(OpenAiRequestTest, WrongTypesNameTheField) {
  auto with = [](const std::string& field) {
    return Chat(absl::StrCat("{", kHello, ", ", field, "}"));
  };
  EXPECT_EQ(ParamOf(with(R"("max_tokens": "ten")")), "max_tokens");
  EXPECT_EQ(ParamOf(with(R"("max_tokens": 0)")), "max_tokens");
  EXPECT_EQ(ParamOf(with(R"("max_tokens": 4.5)")), "max_tokens");
  EXPECT_EQ(ParamOf(with(R"("max_tokens": 99999999999)")), "max_tokens");
  EXPECT_EQ(ParamOf(with(R"("temperature": "hot")")), "temperature");
  EXPECT_EQ(ParamOf(with(R"("stream": "yes")")), "stream");
  EXPECT_EQ(ParamOf(with(R"("speculative": 1)")), "speculative");
  EXPECT_EQ(ParamOf(with(R"("stop": [1])")), "stop");
  EXPECT_EQ(ParamOf(with(R"("seed": 1e300)")), "seed");
  EXPECT_EQ(ParamOf(with(R"("model": 7)")), "model");
  EXPECT_EQ(ParamOf(with(R"("stream_options": true)")), "stream_options");
  EXPECT_EQ(ParamOf(Chat(R"({"messages": "hi"})")), "messages");
  EXPECT_EQ(ParamOf(Chat(R"({"messages": []})")), "messages");
  EXPECT_EQ(ParamOf(Chat(R"({"messages": [{"role": "user", "content": 5}]})")),
            "messages[0].content");
  EXPECT_EQ(ParamOf(Chat(R"({"messages": [{"role": "root", "content": "x"}]})")),
            "messages[0].role");
  EXPECT_EQ(
      ParamOf(Chat(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})")),
      "messages[0].content[0]");
}

TEST(OpenAiRequestTest, RefusesWhatItDoesNotServe) {
  auto with = [](const std::string& field) {
    return Chat(absl::StrCat("{", kHello, ", ", field, "}"));
  };
  EXPECT_EQ(ParamOf(with(R"("n": 2)")), "n");
  EXPECT_TRUE(with(R"("n": 1)").ok());
  EXPECT_EQ(ParamOf(with(R"("functions": [{"name": "f"}])")), "functions");
  EXPECT_EQ(ParamOf(with(R"("logit_bias": {"1": 5})")), "logit_bias");
  EXPECT_EQ(ParamOf(with(R"("response_format": {"type": "xml"})")), "response_format.type");
  EXPECT_TRUE(with(R"("response_format": {"type": "text"})").ok());
  EXPECT_EQ(ParamOf(Completion(R"({"prompt": "x", "echo": true})")), "echo");
  EXPECT_EQ(ParamOf(Completion(R"({"prompt": "x", "best_of": 3})")), "best_of");
}

// Tools: OpenAI's tools, tool_choice, parallel_tool_calls and past calls
// onto ChatInput (the router checks names, limits and the template).
TEST(OpenAiRequestTest, Tools) {
  constexpr char kTool[] =
      R"({"type": "function", "function": {"name": "get_weather", "description": "d", )"
      R"("parameters": {"type": "object", "properties": {"z": {}, "a": {}}}}})";
  auto with = [&](const std::string& field) {
    return Chat(absl::StrCat("{", kHello, R"(, "tools": [)", kTool, "]", field, "}"));
  };
  auto r = with("");
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::ChatInput& chat = r->generate.chat();
  ASSERT_EQ(chat.tools_size(), 1);
  EXPECT_EQ(chat.tools(0).name(), "get_weather");
  EXPECT_EQ(chat.tools(0).description(), "d");
  // The client's key order survives (the prompt and a schema keep it).
  EXPECT_EQ(chat.tools(0).parameters(), R"({"type":"object","properties":{"z":{},"a":{}}})");
  EXPECT_EQ(chat.tool_choice().mode(), v1::ToolChoice::AUTO);
  EXPECT_TRUE(chat.tool_choice().parallel());
  EXPECT_EQ(r->tools, std::vector<std::string>{"get_weather"});

  auto choice = [&](const std::string& field) {
    auto c = with(absl::StrCat(", ", field));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? c->generate.chat().tool_choice() : v1::ToolChoice();
  };
  EXPECT_EQ(choice(R"("tool_choice": "none")").mode(), v1::ToolChoice::NONE);
  EXPECT_TRUE(with(R"(, "tool_choice": "none")")->tools.empty());
  EXPECT_EQ(choice(R"("tool_choice": "required")").mode(), v1::ToolChoice::REQUIRED);
  EXPECT_FALSE(choice(R"("parallel_tool_calls": false)").parallel());
  const v1::ToolChoice named =
      choice(R"("tool_choice": {"type": "function", "function": {"name": "get_weather"}})");
  EXPECT_EQ(named.mode(), v1::ToolChoice::FUNCTION);
  EXPECT_EQ(named.function(), "get_weather");

  EXPECT_EQ(ParamOf(with(R"(, "tool_choice": "always")")), "tool_choice");
  EXPECT_EQ(ParamOf(with(R"(, "tool_choice": {"type": "function"})")), "tool_choice.function");
  EXPECT_EQ(ParamOf(with(R"(, "parallel_tool_calls": "yes")")), "parallel_tool_calls");
  EXPECT_EQ(ParamOf(Chat(absl::StrCat("{", kHello, R"(, "tools": {}})"))), "tools");
  EXPECT_EQ(ParamOf(Chat(absl::StrCat("{", kHello, R"(, "tools": [{"type": "function"}]})"))),
            "tools[0].function");
  EXPECT_EQ(ParamOf(Chat(absl::StrCat("{", kHello,
                                      R"(, "tools": [{"type": "function", "function": {}}]})"))),
            "tools[0].function.name");
  EXPECT_EQ(ParamOf(Completion(absl::StrCat(R"({"prompt": "x", "tools": [)", kTool, "]}"))),
            "tools");
}

TEST(OpenAiRequestTest, PastToolCallsAndResults) {
  auto r = Chat(
      R"({"messages": [{"role": "user", "content": "Weather?"},)"
      R"({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": )"
      R"("function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},)"
      R"({"role": "tool", "tool_call_id": "call_1", "content": "18 C"}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::ChatMessage& a = r->generate.chat().messages(1);
  ASSERT_EQ(a.tool_calls_size(), 1);
  EXPECT_EQ(a.tool_calls(0).id(), "call_1");
  EXPECT_EQ(a.tool_calls(0).name(), "get_weather");
  EXPECT_EQ(a.tool_calls(0).arguments(), R"({"city": "Paris"})");
  EXPECT_EQ(r->generate.chat().messages(2).tool_call_id(), "call_1");
  EXPECT_TRUE(r->tools.empty());  // no tools offered this time
  EXPECT_EQ(ParamOf(Chat(R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "c"}]}]})")),
            "messages[0].tool_calls[0].function");
  EXPECT_EQ(ParamOf(Chat(R"({"messages": [{"role": "assistant", "tool_calls": [{"function": )"
                         R"({"name": "f", "arguments": 5}}]}]})")),
            "messages[0].tool_calls[0].function.arguments");
}

// Structured output: OpenAI's response_format and the peers' fields, onto
// sampling.constraint; one constraint at most.
TEST(OpenAiRequestTest, Constraints) {
  auto with = [](const std::string& field) {
    return Chat(absl::StrCat("{", kHello, ", ", field, "}"));
  };
  auto constraint = [&](const std::string& field) {
    absl::StatusOr<OpenAiRequest> r = with(field);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->generate.sampling().constraint() : v1::Constraint();
  };
  EXPECT_FALSE(constraint(R"("response_format": {"type": "text"})").has_json_object());
  EXPECT_EQ(constraint(R"("temperature": 0)").kind_case(), v1::Constraint::KIND_NOT_SET);
  EXPECT_TRUE(constraint(R"("response_format": {"type": "json_object"})").json_object());
  EXPECT_EQ(nlohmann::json::parse(
                constraint(R"("response_format": {"type": "json_schema", "json_schema": )"
                           R"({"name": "p", "strict": true, "schema": {"type": "integer"}}})")
                    .json_schema()),
            nlohmann::json::parse(R"({"type": "integer"})"));
  EXPECT_EQ(constraint(R"("guided_regex": "[0-9]+")").regex(), "[0-9]+");
  EXPECT_EQ(constraint(R"("grammar": "root ::= \"yes\"")").ebnf(), R"(root ::= "yes")");
  EXPECT_EQ(constraint(R"("guided_choice": ["a.b", "c"])").regex(), R"((a\.b|c))");
  EXPECT_EQ(nlohmann::json::parse(constraint(R"("guided_json": {"type": "string"})").json_schema()),
            nlohmann::json::parse(R"({"type": "string"})"));
  EXPECT_EQ(ParamOf(with(R"("response_format": {"type": "json_schema"})")),
            "response_format.json_schema");
  EXPECT_EQ(ParamOf(with(R"("response_format": {"type": "json_schema", "json_schema": {}})")),
            "response_format.json_schema.schema");
  EXPECT_EQ(ParamOf(with(R"("guided_choice": [])")), "guided_choice");
  EXPECT_EQ(ParamOf(with(R"("guided_regex": 5)")), "guided_regex");
  EXPECT_EQ(ParamOf(with(R"("response_format": {"type": "json_object"}, "guided_regex": "x")")),
            "guided_regex");
}

TEST(OpenAiRequestTest, Logprobs) {
  auto chat = Chat(absl::StrCat("{", kHello, R"(, "logprobs": true, "top_logprobs": 3})"));
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->logprobs, 3);
  EXPECT_EQ(chat->generate.sampling().logprobs(), 3);
  auto chosen_only = Chat(absl::StrCat("{", kHello, R"(, "logprobs": true})"));
  ASSERT_TRUE(chosen_only.ok());
  EXPECT_EQ(chosen_only->logprobs, 0);
  auto off = Chat(absl::StrCat("{", kHello, R"(, "logprobs": false})"));
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->logprobs, -1);
  EXPECT_FALSE(off->generate.sampling().has_logprobs());

  EXPECT_EQ(ParamOf(Chat(absl::StrCat("{", kHello, R"(, "logprobs": true, "top_logprobs": 21})"))),
            "top_logprobs");
  EXPECT_EQ(ParamOf(Chat(absl::StrCat("{", kHello, R"(, "top_logprobs": 2})"))), "top_logprobs");
  EXPECT_EQ(ParamOf(Chat(absl::StrCat("{", kHello, R"(, "logprobs": 2})"))), "logprobs");

  auto completion = Completion(R"({"prompt": "x", "logprobs": 2})");
  ASSERT_TRUE(completion.ok());
  EXPECT_EQ(completion->logprobs, 2);
  EXPECT_EQ(ParamOf(Completion(R"({"prompt": "x", "logprobs": 21})")), "logprobs");
  EXPECT_EQ(ParamOf(Completion(R"({"prompt": "x", "logprobs": true})")), "logprobs");
}

TEST(OpenAiRequestTest, Streaming) {
  auto r = Chat(
      absl::StrCat("{", kHello, R"(, "stream": true, "stream_options": {"include_usage": true}})"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  // Usage chunks belong to streams only.
  auto unstreamed =
      Chat(absl::StrCat("{", kHello, R"(, "stream_options": {"include_usage": true}})"));
  ASSERT_TRUE(unstreamed.ok());
  EXPECT_FALSE(unstreamed->include_usage);
}

TEST(OpenAiRequestTest, MalformedBodies) {
  for (const std::string body :
       {"", "{", "[]", "\"x\"", "{\"messages\": [}", "{\"a\": 1} trailing", "nul"}) {
    auto r = Chat(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  }
  // Invalid UTF-8 inside a string.
  auto bad_utf8 = Chat("{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}");
  ASSERT_FALSE(bad_utf8.ok());
  EXPECT_THAT(bad_utf8.status().message(), HasSubstr("UTF-8"));
  // Nesting is bounded before a tree is built.
  std::string deep = "{\"x\": " + std::string(10000, '[') + std::string(10000, ']') + "}";
  auto too_deep = Chat(deep);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_THAT(too_deep.status().message(), HasSubstr("nested"));
}

}  // namespace
}  // namespace pdserve::router::openai
