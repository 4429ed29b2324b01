// ChatTools: tools shown as the template's tojson writes them, checked
// limits and names, past calls re-rendered, and the grammar a forced
// choice imposes, walked byte by byte with XGrammar on a byte vocabulary.
#include "router/call/chat_tools.h"

#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/grammar/grammar_compiler.h"
#include "common/grammar/grammar_matcher.h"
#include "gtest/gtest.h"

namespace pdserve::router {
namespace {

constexpr char kWeatherParameters[] =
    R"({"type": "object", "properties": {"city": {"type": "string"}, )"
    R"("unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]})";

v1::ChatInput WeatherChat(v1::ToolChoice::Mode mode) {
  v1::ChatInput chat;
  v1::ChatMessage* m = chat.add_messages();
  m->set_role("user");
  m->set_content("Weather in Zürich?");
  v1::Tool* weather = chat.add_tools();
  weather->set_name("get_weather");
  weather->set_description("Current weather — «now»");
  weather->set_parameters(kWeatherParameters);
  chat.add_tools()->set_name("get_time");  // no description, no parameters
  chat.mutable_tool_choice()->set_mode(mode);
  return chat;
}

TEST(ChatToolsTest, ToolsAreShownAsTojsonWritesThem) {
  auto p = PrepareChat(WeatherChat(v1::ToolChoice::AUTO), /*supports_tools=*/true);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->tools.size(), 2u);
  // The client's key order, ", " and ": ", UTF-8 kept as is.
  EXPECT_EQ(p->tools[0],
            R"({"type": "function", "function": {"name": "get_weather", "description": )"
            R"("Current weather — «now»", "parameters": {"type": "object", "properties": )"
            R"({"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", )"
            R"("fahrenheit"]}}, "required": ["city"]}}})");
  EXPECT_EQ(p->tools[1], R"({"type": "function", "function": {"name": "get_time"}})");
  EXPECT_FALSE(p->tool_grammar.has_value());  // auto: the model decides
}

TEST(ChatToolsTest, NoneHidesTheTools) {
  auto p = PrepareChat(WeatherChat(v1::ToolChoice::NONE), /*supports_tools=*/false);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->tools.empty());
  EXPECT_FALSE(p->tool_grammar.has_value());
}

TEST(ChatToolsTest, PastCallsAreRewrittenAsTojsonWritesThem) {
  v1::ChatInput chat = WeatherChat(v1::ToolChoice::AUTO);
  v1::ChatMessage* a = chat.add_messages();
  a->set_role("assistant");
  v1::ToolCall* call = a->add_tool_calls();
  call->set_name("get_weather");
  call->set_arguments(R"({"city":"Zürich","unit":"celsius"})");
  a->add_tool_calls()->set_name("get_time");  // no arguments: {}
  auto p = PrepareChat(chat, true);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->messages[1].tool_calls.size(), 2u);
  EXPECT_EQ(p->messages[1].tool_calls[0].arguments, R"({"city": "Zürich", "unit": "celsius"})");
  EXPECT_EQ(p->messages[1].tool_calls[1].arguments, "{}");
}

TEST(ChatToolsTest, BadToolsAreInvalidArgument) {
  auto refused = [](const v1::ChatInput& chat, bool supports_tools = true) {
    auto p = PrepareChat(chat, supports_tools);
    return !p.ok() && p.status().code() == absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(refused(WeatherChat(v1::ToolChoice::AUTO), /*supports_tools=*/false));
  v1::ChatInput chat = WeatherChat(v1::ToolChoice::AUTO);
  chat.mutable_tools(0)->set_name("get weather");
  EXPECT_TRUE(refused(chat));
  chat = WeatherChat(v1::ToolChoice::AUTO);
  chat.mutable_tools(0)->set_name(std::string(65, 'a'));
  EXPECT_TRUE(refused(chat));
  chat = WeatherChat(v1::ToolChoice::AUTO);
  chat.mutable_tools(1)->set_name("get_weather");
  EXPECT_TRUE(refused(chat));  // two of one name
  chat = WeatherChat(v1::ToolChoice::AUTO);
  chat.mutable_tools(0)->set_parameters("[1, 2]");
  EXPECT_TRUE(refused(chat));
  chat = WeatherChat(v1::ToolChoice::FUNCTION);
  chat.mutable_tool_choice()->set_function("get_news");
  EXPECT_TRUE(refused(chat));
  chat = WeatherChat(v1::ToolChoice::REQUIRED);
  chat.clear_tools();
  EXPECT_TRUE(refused(chat));
  chat = WeatherChat(v1::ToolChoice::AUTO);
  for (int i = 0; i < kMaxTools; ++i) chat.add_tools()->set_name(absl::StrCat("f", i));
  EXPECT_TRUE(refused(chat));
  chat = WeatherChat(v1::ToolChoice::AUTO);
  chat.mutable_tools(0)->set_description(std::string(kMaxToolBytes, 'x'));
  EXPECT_TRUE(refused(chat));
  chat = WeatherChat(v1::ToolChoice::AUTO);
  v1::ChatMessage* a = chat.add_messages();
  a->set_role("assistant");
  a->add_tool_calls()->set_name("get_weather");
  a->mutable_tool_calls(0)->set_arguments("{not json");
  EXPECT_TRUE(refused(chat));
}

// Every byte is a token; 256 is the end of the answer.
GrammarVocab ByteVocab() {
  GrammarVocab v;
  for (int b = 0; b < 256; ++b) v.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  v.token_bytes.push_back("");
  v.vocab_size = 257;
  v.stop_token_ids = {256};
  return v;
}

class ToolGrammarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = GrammarCompiler::Create(ByteVocab());
    ASSERT_TRUE(c.ok()) << c.status();
    compiler_ = *std::move(c);
  }

  // Whether the grammar of `mode` takes `text` and then the end.
  bool Takes(v1::ToolChoice::Mode mode, std::string_view text, bool parallel = true) {
    v1::ChatInput chat = WeatherChat(mode);
    chat.mutable_tool_choice()->set_function("get_weather");
    chat.mutable_tool_choice()->set_parallel(parallel);
    auto p = PrepareChat(chat, true);
    EXPECT_TRUE(p.ok() && p->tool_grammar.has_value()) << p.status();
    if (!p.ok() || !p->tool_grammar.has_value()) return false;
    auto grammar = compiler_->Compile(GrammarConstraint::StructuralTag(*p->tool_grammar));
    EXPECT_TRUE(grammar.ok()) << grammar.status();
    if (!grammar.ok()) return false;
    GrammarMatcher m(*grammar);
    for (unsigned char c : text) {
      if (!m.Accept(c)) return false;
    }
    return m.Accept(256) && m.IsTerminated();
  }

  std::unique_ptr<GrammarCompiler> compiler_;
};

constexpr char kParis[] =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
constexpr char kTime[] = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";

TEST_F(ToolGrammarTest, NamedFunctionTakesOneCallOfIt) {
  EXPECT_TRUE(Takes(v1::ToolChoice::FUNCTION, kParis));
  EXPECT_FALSE(Takes(v1::ToolChoice::FUNCTION, kTime));
  EXPECT_FALSE(Takes(v1::ToolChoice::FUNCTION, "The weather is fine."));
  EXPECT_FALSE(Takes(v1::ToolChoice::FUNCTION, ""));
  // The arguments follow the tool's schema.
  EXPECT_FALSE(Takes(v1::ToolChoice::FUNCTION,
                     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": "
                     "\"Paris\"}}\n</tool_call>"));
  EXPECT_FALSE(Takes(v1::ToolChoice::FUNCTION,
                     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                     "\"Paris\", \"unit\": \"kelvin\"}}\n</tool_call>"));
}

TEST_F(ToolGrammarTest, RequiredTakesOneOrMoreCallsOfAnyTool) {
  EXPECT_TRUE(Takes(v1::ToolChoice::REQUIRED, kParis));
  EXPECT_TRUE(Takes(v1::ToolChoice::REQUIRED, kTime));
  EXPECT_TRUE(Takes(v1::ToolChoice::REQUIRED, absl::StrCat(kParis, "\n", kTime)));
  EXPECT_FALSE(Takes(v1::ToolChoice::REQUIRED, absl::StrCat(kParis, "\n", kTime), false));
  EXPECT_FALSE(Takes(v1::ToolChoice::REQUIRED, ""));
  EXPECT_FALSE(Takes(v1::ToolChoice::REQUIRED,
                     "<tool_call>\n{\"name\": \"get_news\", \"arguments\": {}}\n</tool_call>"));
}

}  // namespace
}  // namespace pdserve::router
