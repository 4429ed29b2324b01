#include "router/api/openai/tool_call_parser.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pdserve::router::openai {
namespace {

struct Parsed {
  std::string content;
  std::vector<ToolCallParser::Call> calls;
};

// Feeds `text` in pieces of `step` bytes (0: whole), then finishes.
Parsed Parse(const std::string& text, size_t step = 0) {
  ToolCallParser p({"get_weather", "get_time"});
  Parsed out;
  auto take = [&out](ToolCallParser::Output o) {
    out.content += o.content;
    for (auto& c : o.calls) out.calls.push_back(std::move(c));
  };
  if (step == 0) step = text.size() + 1;
  for (size_t i = 0; i < text.size(); i += step) take(p.Feed(text.substr(i, step)));
  take(p.Finish());
  EXPECT_EQ(p.calls(), static_cast<int>(out.calls.size()));
  return out;
}

constexpr char kTwoCalls[] =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
    "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";

TEST(ToolCallParserTest, CallsBecomeToolCallsWhateverTheChunking) {
  for (size_t step : {0, 1, 2, 3, 5, 7, 11}) {
    SCOPED_TRACE(step);
    const Parsed p = Parse(kTwoCalls, step);
    EXPECT_EQ(p.content, "");
    ASSERT_EQ(p.calls.size(), 2u);
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris"})");
    EXPECT_EQ(p.calls[1].name, "get_time");
    EXPECT_EQ(p.calls[1].arguments, "{}");
    EXPECT_EQ(p.calls[0].id.rfind("call_", 0), 0u);
    EXPECT_EQ(p.calls[0].id.size(), 29u);
    EXPECT_NE(p.calls[0].id, p.calls[1].id);
  }
}

TEST(ToolCallParserTest, TextAroundCallsIsContent) {
  for (size_t step : {0, 1, 4}) {
    const Parsed p = Parse(std::string("Let me check.\n") + kTwoCalls + "\nDone.", step);
    EXPECT_EQ(p.content, "Let me check.\nDone.");
    EXPECT_EQ(p.calls.size(), 2u);
  }
}

TEST(ToolCallParserTest, PlainAnswersPassThroughUnchanged) {
  for (const std::string text :
       {"The capital is Paris.", "  spaced  ", "a < b and <tool", "\n", "x <tool_cal"}) {
    for (size_t step : {0, 1, 3}) EXPECT_EQ(Parse(text, step).content, text) << step;
  }
}

TEST(ToolCallParserTest, BrokenCallsAreContentVerbatim) {
  const std::string bad = "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>";
  const std::string unnamed = "<tool_call>\n{\"arguments\": {}}\n</tool_call>";
  const std::string cut = "<tool_call>\n{\"name\": \"get_weather\", \"argu";
  for (size_t step : {0, 1, 6}) {
    EXPECT_EQ(Parse(bad, step).content, bad);
    EXPECT_EQ(Parse(unnamed, step).content, unnamed);
    EXPECT_EQ(Parse("not json: <tool_call>oops</tool_call>", step).content,
              "not json: <tool_call>oops</tool_call>");
    const Parsed p = Parse(cut, step);
    EXPECT_EQ(p.content, cut);
    EXPECT_TRUE(p.calls.empty());
  }
}

TEST(ToolCallParserTest, HeldTextIsReleasedOnceKnown) {
  ToolCallParser p;
  EXPECT_EQ(p.Feed("Hi <tool").content, "Hi");  // the space may come before a call
  EXPECT_EQ(p.Feed("box> ok").content, " <toolbox> ok");
  EXPECT_EQ(p.Feed("\n").content, "");  // whitespace waits for more text
  EXPECT_EQ(p.Feed("more").content, "\nmore");
  EXPECT_EQ(p.Finish().content, "");
}

// Small models often answer with the call's object alone.
TEST(ToolCallParserTest, BareObjectNamingAToolIsACall) {
  for (size_t step : {0, 1, 5}) {
    Parsed p = Parse("{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}", step);
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].name, "get_time");
    EXPECT_EQ(p.calls[0].arguments, R"({"tz":"UTC"})");
    EXPECT_EQ(p.content, "");
    // Not a call: an unknown name, no arguments, more keys, more text.
    for (const std::string text :
         {R"({"name": "Bob", "arguments": {}})", R"({"name": "get_time"})",
          R"({"name": "get_time", "arguments": {}, "x": 1})",
          R"({"name": "get_time", "arguments": {}} and more)", R"({"a": 1})"}) {
      p = Parse(text, step);
      EXPECT_TRUE(p.calls.empty()) << text;
      EXPECT_EQ(p.content, text);
    }
  }
  // In a Markdown code fence, as models write JSON.
  Parsed fenced = Parse("```json\n{\n  \"name\": \"get_time\",\n  \"arguments\": {}\n}\n```\n");
  EXPECT_EQ(fenced.calls.size(), 1u);
  EXPECT_EQ(Parse("```json\n{\"a\": 1}\n```").content, "```json\n{\"a\": 1}\n```");
  EXPECT_EQ(Parse("```python\nprint(1)\n```").content, "```python\nprint(1)\n```");
  // Only the answer's start counts.
  EXPECT_EQ(Parse(R"(Use {"name": "get_time", "arguments": {}})").content,
            R"(Use {"name": "get_time", "arguments": {}})");
}

}  // namespace
}  // namespace pdserve::router::openai
