#include "common/chat_template.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/gguf_file.h"
#include "common/gguf_writer.h"
#include "gtest/gtest.h"
#include "tests/golden/test_model.h"

namespace pdserve {
namespace {

// tokenizer.chat_template of SmolLM2-135M-Instruct.Q4_1.gguf, verbatim (the
// newlines inside the string literals are real newlines in the file).
constexpr char kSmolLm2Template[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

constexpr char kSmolSystem[] =
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n";

std::string RenderOk(const ChatTemplate& t, const std::vector<ChatMessage>& messages,
                     bool add_generation_prompt) {
  auto r = t.Render(messages, add_generation_prompt);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : "";
}

// Expected strings below were rendered by jinja2 from kSmolLm2Template (the
// way llama-cpp-python's create_chat_completion does).
TEST(ChatTemplateTest, SmolLm2AddsDefaultSystemPrompt) {
  const ChatTemplate t = ChatTemplate::FromJinja(kSmolLm2Template);
  EXPECT_TRUE(t.recognized());
  ASSERT_TRUE(t.default_system_prompt().has_value());
  EXPECT_EQ(*t.default_system_prompt(),
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  EXPECT_EQ(
      RenderOk(t, {{"user", "Hello"}}, true),
      std::string(kSmolSystem) + "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, SmolLm2KeepsCallerSystemPrompt) {
  const ChatTemplate t = ChatTemplate::FromJinja(kSmolLm2Template);
  EXPECT_EQ(RenderOk(t, {{"system", "Be terse."}, {"user", "Hi"}}, true),
            "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, SmolLm2MultiTurnWithoutGenerationPrompt) {
  const ChatTemplate t = ChatTemplate::FromJinja(kSmolLm2Template);
  EXPECT_EQ(RenderOk(t, {{"user", "Hi"}, {"system", "Late system"}}, false),
            std::string(kSmolSystem) +
                "<|im_start|>user\nHi<|im_end|>\n<|im_start|>system\nLate system<|im_end|>\n");
  EXPECT_EQ(RenderOk(t, {{"assistant", "I start"}}, true),
            std::string(kSmolSystem) +
                "<|im_start|>assistant\nI start<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(RenderOk(t, {{"user", "q"}, {"tool", "{\"x\":1}"}}, true),
            std::string(kSmolSystem) +
                "<|im_start|>user\nq<|im_end|>\n<|im_start|>tool\n{\"x\":1}<|im_end|>\n"
                "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, EscapedNewlinesAndElseBranch) {
  // Qwen2.5-style: the default lives in an else branch and "\n" is escaped.
  const ChatTemplate t = ChatTemplate::FromJinja(
      "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + "
      "messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are "
      "Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
      "{%- for message in messages %}...{%- endfor %}");
  ASSERT_TRUE(t.default_system_prompt().has_value());
  EXPECT_EQ(*t.default_system_prompt(),
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  EXPECT_EQ(RenderOk(t, {{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, PlainChatMlHasNoDefaultSystemPrompt) {
  const ChatTemplate t = ChatTemplate::FromJinja(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
      "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}");
  EXPECT_TRUE(t.recognized());
  EXPECT_FALSE(t.default_system_prompt().has_value());
  EXPECT_EQ(RenderOk(t, {{"user", "Hi"}}, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, NonChatMlFallsBackToPlainChatMl) {
  const ChatTemplate t = ChatTemplate::FromJinja(
      "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
      "{{ m['content'] }}<|eot_id|>{% endfor %}");
  EXPECT_FALSE(t.recognized());
  EXPECT_FALSE(t.default_system_prompt().has_value());
  EXPECT_EQ(RenderOk(t, {{"user", "Hi"}}, false), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplateTest, RejectsEmptyListsAndUnknownRoles) {
  const ChatTemplate t = ChatTemplate::FromJinja(kSmolLm2Template);
  EXPECT_EQ(t.Render({}, true).status().code(), absl::StatusCode::kInvalidArgument);
  const absl::Status s = t.Render({{"user", "a"}, {"robot", "b"}}, true).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("message 1"), absl::string_view::npos) << s;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufWith(void (*add)(GgufWriter*)) {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  add(&w);
  return GgufFile::FromBuffer(w.Serialize());
}

TEST(ChatTemplateTest, FromGguf) {
  auto with =
      GgufWith([](GgufWriter* w) { w->AddString("tokenizer.chat_template", kSmolLm2Template); });
  ASSERT_TRUE(with.ok()) << with.status();
  auto t = ChatTemplate::FromGguf(**with);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->default_system_prompt().has_value());

  auto without = GgufWith([](GgufWriter*) {});
  ASSERT_TRUE(without.ok());
  auto fallback = ChatTemplate::FromGguf(**without);
  ASSERT_TRUE(fallback.ok());
  EXPECT_FALSE(fallback->recognized());

  auto wrong_type = GgufWith([](GgufWriter* w) { w->AddUint32("tokenizer.chat_template", 7); });
  ASSERT_TRUE(wrong_type.ok());
  EXPECT_EQ(ChatTemplate::FromGguf(**wrong_type).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, RealModelMatchesReferenceExample) {
  const std::string path = testing::RealModelPath();
  if (path.empty()) GTEST_SKIP() << "SmolLM2 model not found";
  auto gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto t = ChatTemplate::FromGguf(**gguf);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(RenderOk(*t, {{"user", "Hello"}}, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace pdserve
