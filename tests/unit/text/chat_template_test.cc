#include "common/text/chat_template.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_writer.h"
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

TEST(ChatTemplateTest, UnknownTemplateFallsBackToPlainChatMl) {
  const ChatTemplate t = ChatTemplate::FromJinja(
      "{% for m in messages %}<|turn|>{{ m['role'] }}\n{{ m['content'] }}<|end_turn|>\n"
      "{% endfor %}");
  EXPECT_FALSE(t.recognized());
  EXPECT_FALSE(t.default_system_prompt().has_value());
  EXPECT_EQ(RenderOk(t, {{"user", "Hi"}}, false), "<|im_start|>user\nHi<|im_end|>\n");
}

// The LLaMA templates below are the models' own Jinja; the expected strings
// are what llama.cpp's llama_chat_apply_template (llama-cpp-python 0.3.7)
// returns for them.
const std::vector<ChatMessage> kConversation = {{"system", "You are terse."},
                                                {"user", "  Hi there \n"},
                                                {"assistant", " Hello! "},
                                                {"user", "2+2?"}};

constexpr char kLlama3Template[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

TEST(ChatTemplateTest, Llama3MatchesLlamaCpp) {
  const ChatTemplate t = ChatTemplate::FromJinja(kLlama3Template);
  EXPECT_TRUE(t.recognized());
  EXPECT_EQ(t.style(), ChatTemplate::Style::kLlama3);
  EXPECT_EQ(RenderOk(t, kConversation, true),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(RenderOk(t, {{"user", "x"}}, false),
            "<|start_header_id|>user<|end_header_id|>\n\nx<|eot_id|>");
}

TEST(ChatTemplateTest, Llama2ChatMatchesLlamaCpp) {
  const ChatTemplate t = ChatTemplate::FromJinja(
      "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
      "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
      "{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if "
      "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + "
      "system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
      "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' "
      "+ content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + "
      "content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}");
  EXPECT_TRUE(t.recognized());
  EXPECT_EQ(t.style(), ChatTemplate::Style::kLlama2);
  EXPECT_EQ(RenderOk(t, kConversation, true),
            "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi there [/INST]Hello!</s>"
            "[INST] 2+2? [/INST]");
  EXPECT_EQ(RenderOk(t, {{"user", "  Hi there \n"}}, true), "[INST] Hi there [/INST]");
}

TEST(ChatTemplateTest, Llama2WithoutSysBlocksMatchesLlamaCpp) {
  const ChatTemplate t = ChatTemplate::FromJinja(
      "{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
      "message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token }}{% endif %}"
      "{% endfor %}");
  EXPECT_EQ(t.style(), ChatTemplate::Style::kLlama2);
  EXPECT_EQ(RenderOk(t, kConversation, false),
            "[INST] You are terse.\n  Hi there \n [/INST] Hello! </s>[INST] 2+2? [/INST]");
}

// Mistral's official templates, cut to the markers llama.cpp detects them
// by; expected strings from llama_chat_apply_template as above.
TEST(ChatTemplateTest, MistralTemplatesMatchLlamaCpp) {
  const std::string v3 =
      "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] "
      "%}{%- endif %}{%- for message in loop_messages %}{%- if message['role'] == 'user' %}{%- if "
      "tools is not none and (message == user_messages[-1]) %}{{- '[AVAILABLE_TOOLS] [' }}{%- "
      "endif %}{{- '[INST] ' + message['content'] + '[/INST]' }}{%- elif message['role'] == "
      "'assistant' %}{{- ' ' + message['content']|trim + eos_token}}{%- endif %}{%- endfor %}";
  std::string v3_tekken = v3;
  v3_tekken.replace(v3_tekken.find("'[INST] '"), 9, "\"[INST]\"");
  struct Case {
    const char* name;
    std::string jinja;
    ChatTemplate::Style style;
    const char* want;
  };
  const Case cases[] = {
      {"v7",
       "{%- for message in messages %}{%- if message['role'] == 'system' %}{{- '[SYSTEM_PROMPT]' "
       "+ message['content'] + '[/SYSTEM_PROMPT]' }}{%- elif message['role'] == 'user' %}{{- "
       "'[INST]' + message['content'] + '[/INST]' }}{%- endif %}{%- endfor %}",
       ChatTemplate::Style::kMistralV7,
       "[SYSTEM_PROMPT] You are terse.[/SYSTEM_PROMPT][INST]   Hi there \n[/INST]  Hello! </s>"
       "[INST] 2+2?[/INST]"},
      {"v3", v3, ChatTemplate::Style::kMistral,
       "[INST] You are terse.\n\n  Hi there \n[/INST] Hello!</s>[INST] 2+2?[/INST]"},
      {"v3-tekken", v3_tekken, ChatTemplate::Style::kMistral,
       "[INST]You are terse.\n\n  Hi there \n[/INST] Hello! </s>[INST]2+2?[/INST]"},
      {"v1",
       "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ ' [INST] "
       "' + system_message + message['content'] + ' [/INST]' }}{% else %}{{ ' ' + "
       "message['content'] + eos_token }}{% endif %}{% endfor %}",
       ChatTemplate::Style::kMistral,
       " [INST] You are terse.\n\n  Hi there \n [/INST]  Hello! </s> [INST] 2+2? [/INST]"},
  };
  for (const Case& c : cases) {
    const ChatTemplate t = ChatTemplate::FromJinja(c.jinja);
    EXPECT_TRUE(t.recognized()) << c.name;
    EXPECT_EQ(t.style(), c.style) << c.name;
    EXPECT_EQ(RenderOk(t, kConversation, true), c.want) << c.name;
  }
}

// TinyLlama-1.1B-Chat's template, verbatim; expected strings rendered by
// jinja2 with trim_blocks and lstrip_blocks (as Hugging Face applies it) and
// eos_token "</s>".
TEST(ChatTemplateTest, ZephyrStyleMatchesItsJinja) {
  const ChatTemplate t = ChatTemplate::FromJinja(
      "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + "
      "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ "
      "'<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == "
      "'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif "
      "%}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n"
      "{% endfor %}",
      "</s>");
  EXPECT_TRUE(t.recognized());
  EXPECT_EQ(t.style(), ChatTemplate::Style::kZephyr);
  EXPECT_EQ(RenderOk(t, kConversation, true),
            "<|system|>\nYou are terse.</s>\n<|user|>\n  Hi there \n</s>\n<|assistant|>\n Hello! "
            "</s>\n<|user|>\n2+2?</s>\n<|assistant|>\n");
  EXPECT_EQ(RenderOk(t, kConversation, false),
            "<|system|>\nYou are terse.</s>\n<|user|>\n  Hi there \n</s>\n<|assistant|>\n Hello! "
            "</s>\n<|user|>\n2+2?</s>\n");
  // Without eos_token in the template (Falcon 3) turns end with the newline.
  const ChatTemplate falcon = ChatTemplate::FromJinja(
      "{% for m in messages %}{{ '<|' + m['role'] + '|>\n' + m['content'] + '\n' }}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}{# <|user|> #}",
      "</s>");
  EXPECT_EQ(RenderOk(falcon, {{"user", "Hi"}}, true), "<|user|>\nHi\n<|assistant|>\n");
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

// Gemma 3's instruction-tuned template (gemma-3-270m-it, abridged to the
// parts that decide the rendering).
constexpr std::string_view kGemma3Template =
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = "
    "messages[0]['content'] + '\\n\\n' -%}{%- set loop_messages = messages[1:] -%}{%- else -%}"
    "{%- set first_user_prefix = \"\" -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}{{ '<start_of_turn>' + role + '\\n' + "
    "(first_user_prefix if loop.first else \"\") }}{{ message['content'] | trim }}"
    "{{ '<end_of_turn>\\n' }}{%- endfor -%}{%- if add_generation_prompt -%}"
    "{{'<start_of_turn>model\\n'}}{%- endif -%}";

TEST(ChatTemplateTest, GemmaTurnsAsItsJinjaRendersThem) {
  const ChatTemplate t = ChatTemplate::FromJinja(kGemma3Template);
  EXPECT_TRUE(t.recognized());
  EXPECT_EQ(t.style(), ChatTemplate::Style::kGemma);
  EXPECT_EQ(RenderOk(t, {{"user", "Hello"}}, true),
            "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(RenderOk(t,
                     {{"system", "Be brief."},
                      {"user", "  Hi  "},
                      {"assistant", "Hello!\n"},
                      {"user", "Bye"}},
                     false),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
            "<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n");
  // Its template raises on roles that do not alternate.
  EXPECT_EQ(t.Render({{"user", "a"}, {"user", "b"}}, true).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.Render({{"assistant", "a"}}, true).status().code(),
            absl::StatusCode::kInvalidArgument);
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
  auto none = ChatTemplate::FromGguf(**without);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->recognized());
  // A base model refuses chat instead of guessing a format.
  EXPECT_EQ(none->Render({{"user", "Hi"}}, true).status().code(),
            absl::StatusCode::kInvalidArgument);

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
