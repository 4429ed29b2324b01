#include "common/text/hermes_tool_format.h"

#include <string>
#include <vector>

#include "common/text/chat_template.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

// tokenizer.chat_template of Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf,
// verbatim.
constexpr char kQwenTemplate[] = R"jinja({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)jinja";

// The tool as the template's tojson writes it (Python's json.dumps).
constexpr char kWeatherTool[] =
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the current weather in a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name, e.g. Paris\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}}";

// Expected strings were rendered from kQwenTemplate by jinja2 with
// transformers' tojson (json.dumps, ensure_ascii=False), as
// apply_chat_template renders them.
constexpr char kCallsAndResults[] =
    "<|im_start|>system\n"
    "You are terse.\n"
    "\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the current weather in a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name, e.g. Paris\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}}\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "Weather in Paris and Zürich?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
    "</tool_call>\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"unit\": \"celsius\"}}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "18 C\n"
    "</tool_response>\n"
    "<tool_response>\n"
    "12 C\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n";
constexpr char kDefaultSystemWithTools[] =
    "<|im_start|>system\n"
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n"
    "\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the current weather in a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name, e.g. Paris\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}}\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "Hi<|im_end|>\n"
    "<|im_start|>assistant\n";
constexpr char kCallsWithoutTools[] =
    "<|im_start|>system\n"
    "You are terse.<|im_end|>\n"
    "<|im_start|>user\n"
    "Weather in Paris and Zürich?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
    "</tool_call>\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"unit\": \"celsius\"}}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "18 C\n"
    "</tool_response>\n"
    "<tool_response>\n"
    "12 C\n"
    "</tool_response><|im_end|>\n";

std::vector<ChatMessage> CallsAndResults() {
  return {
      {"system", "You are terse."},
      {"user", "Weather in Paris and Zürich?"},
      {"assistant", "",
       {{"get_weather", R"({"city": "Paris"})"},
        {"get_weather", R"({"city": "Zürich", "unit": "celsius"})"}}},
      {"tool", "18 C"},
      {"tool", "12 C"},
  };
}

ChatTemplate Qwen() { return ChatTemplate::FromJinja(kQwenTemplate); }

TEST(HermesToolFormatTest, QwenTemplateHasToolCalling) {
  EXPECT_TRUE(Qwen().supports_tools());
  EXPECT_TRUE(HermesToolFormat::FromJinja(kQwenTemplate).has_value());
}

TEST(HermesToolFormatTest, CallsAndResultsMatchTheJinjaTemplate) {
  const std::vector<std::string> tools = {kWeatherTool};
  auto r = Qwen().Render(CallsAndResults(), /*add_generation_prompt=*/true, tools);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, kCallsAndResults);
}

TEST(HermesToolFormatTest, DefaultSystemPromptJoinsTheToolList) {
  const std::vector<std::string> tools = {kWeatherTool};
  auto r = Qwen().Render({{"user", "Hi"}}, /*add_generation_prompt=*/true, tools);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, kDefaultSystemWithTools);
}

TEST(HermesToolFormatTest, PastCallsRenderWithoutTools) {
  auto r = Qwen().Render(CallsAndResults(), /*add_generation_prompt=*/false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, kCallsWithoutTools);
}

TEST(HermesToolFormatTest, PlainChatIsUnchanged) {
  auto r = Qwen().Render({{"user", "Hi"}}, /*add_generation_prompt=*/true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r,
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(HermesToolFormatTest, TemplatesWithoutToolCallingRefuseTools) {
  const ChatTemplate plain = ChatTemplate::FromJinja(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}");
  EXPECT_FALSE(plain.supports_tools());
  const std::vector<std::string> tools = {kWeatherTool};
  EXPECT_EQ(plain.Render({{"user", "Hi"}}, true, tools).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(plain.Render(CallsAndResults(), true).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Mentioning the markers is not enough: the instructions must be there.
  EXPECT_FALSE(HermesToolFormat::FromJinja("<tool_call> <tool_response>").has_value());
}

TEST(HermesToolFormatTest, CallText) {
  EXPECT_EQ(HermesToolFormat::CallText("f", "{}"),
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
}

}  // namespace
}  // namespace pdserve
