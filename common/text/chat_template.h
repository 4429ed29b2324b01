// ChatTemplate: turns a list of chat messages into the prompt text the
// model was trained on.
//
// We do not implement Jinja. Instead the model's `tokenizer.chat_template`
// is recognised, in llama.cpp's order (llm_chat_detect_template):
//  - ChatML, a template that mentions "<|im_start|>" (SmolLM2, Qwen2.5):
//      <|im_start|>{role}\n{content}<|im_end|>\n ... [<|im_start|>assistant\n]
//    If it also contains a literal "<|im_start|>system\n...<|im_end|>\n"
//    block guarded by a test on messages[0], that block is the default
//    system prompt, emitted when the first message is not a system message.
//    Its text is read from the template, never hard-coded. The result is
//    byte-identical to what the Jinja template renders (and to what
//    llama-cpp-python's create_chat_completion feeds the model).
//  - LLaMA 2 ("[INST]" without Mistral's markers): "[INST] " then per
//    message "<<SYS>>\n{system}\n<</SYS>>\n\n" (or "{system}\n" when the
//    template has no "<<SYS>>"), "{user} [/INST]", "{assistant}</s>", with a
//    new "[INST] " (or "<s>[INST] ") before the next turn.
//  - Mistral's official templates ("[SYSTEM_PROMPT]": v7; "[AVAILABLE_TOOLS]"
//    or "' [INST] ' + system_message": v1, v3, v3-tekken), each spaced as
//    llama.cpp spaces it: "[INST] {system}\n\n{user}[/INST] {assistant}</s>".
//  - Zephyr style ("<|user|>" and "<|assistant|>", no "<|end|>": TinyLlama
//    chat, Zephyr, Falcon 3), byte-identical to the Jinja template:
//      <|{role}|>\n{content}{end}\n ... [<|assistant|>\n]
//    where {end} is the model's EOS text when the template appends
//    eos_token (TinyLlama: "</s>"), else "<|endoftext|>" when it names that,
//    else nothing (Falcon 3).
//  - LLaMA 3 ("<|start_header_id|>" and "<|end_header_id|>"):
//      <|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|>
//    ... [<|start_header_id|>assistant<|end_header_id|>\n\n]
//  - Gemma ("<start_of_turn>"), as Gemma 3's Jinja renders it: a leading
//    system message becomes "{system}\n\n" before the first user turn's
//    text, assistant turns are role "model", contents are trimmed, and roles
//    after it must alternate user/model (INVALID_ARGUMENT otherwise):
//      <start_of_turn>user\n{content}<end_of_turn>\n ... [<start_of_turn>model\n]
// The LLaMA and Mistral renderings are llama.cpp's built-in templates (what llama-server
// uses without --jinja); they carry no BOS, which the tokenizer adds
// (Tokenizer::EncodePrompt). LLaMA 3.1+'s Jinja adds a dated default system
// prompt that this rendering leaves out, as llama.cpp's does.
//
// A model without a template (a base model such as Gemma 3 270M) refuses
// chat: Render() gives INVALID_ARGUMENT rather than guessing a format the
// model never saw. An unrecognised template falls back to plain ChatML
// without a default system prompt, with a LOG(WARNING) at load time.
//
// Message contents are inserted verbatim (LLaMA 3: trimmed), so text such
// as "<|im_end|>" in a message is tokenized as that special token when the
// prompt is encoded with parse_special, exactly as with the Jinja template.
//
// Tool calling is rendered for ChatML templates in the Hermes style
// (Qwen2.5): see hermes_tool_format.h. Other templates refuse tools.
//
// Immutable after construction; Render() is const and thread-safe.
#ifndef PDSERVE_COMMON_TEXT_CHAT_TEMPLATE_H_
#define PDSERVE_COMMON_TEXT_CHAT_TEMPLATE_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/gguf/gguf_file.h"
#include "common/text/hermes_tool_format.h"

namespace pdserve {

// A call an assistant turn made: the function's name and its arguments,
// a JSON object written as the template's tojson writes it.
struct ChatToolCall {
  std::string name;
  std::string arguments;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
  std::vector<ChatToolCall> tool_calls = {};  // assistant turns only
};

class ChatTemplate {
 public:
  // Reads `tokenizer.chat_template`; INVALID_ARGUMENT if it is present but
  // not a string. Without one, Render() refuses. `eos_text` is the
  // text of the model's EOS token, for templates that use eos_token.
  static absl::StatusOr<ChatTemplate> FromGguf(const GgufFile& gguf,
                                               std::string_view eos_text = "");
  // Recognises a Jinja template string (see the file comment).
  static ChatTemplate FromJinja(std::string_view jinja, std::string_view eos_text = "");

  // INVALID_ARGUMENT for an empty list, an unknown role, a template that
  // refuses the conversation, or a model without a template. `tools` (each
  // one tool's JSON as the template's tojson writes it) and messages with
  // tool calls need a template with tool calling (supports_tools()).
  absl::StatusOr<std::string> Render(absl::Span<const ChatMessage> messages,
                                     bool add_generation_prompt,
                                     absl::Span<const std::string> tools = {}) const;

  // Whether the template renders tools and tool calls (Hermes style, as
  // Qwen2.5's; see hermes_tool_format.h).
  bool supports_tools() const { return tool_format_.has_value(); }

  enum class Style { kNone, kChatMl, kLlama2, kLlama3, kMistral, kMistralV7, kZephyr, kGemma };

  // False when the template was not recognised (or is missing).
  bool recognized() const { return recognized_; }
  Style style() const { return style_; }
  const std::optional<std::string>& default_system_prompt() const { return default_system_prompt_; }

 private:
  // LLaMA 2 variants (llama.cpp's llama2, -sys, -sys-bos, -sys-strip).
  struct Llama2Options {
    bool system = false;  // <<SYS>> blocks
    bool bos_in_history = false;
    bool strip = false;  // contents trimmed
  };

  // Mistral v1 / v3 / v3-tekken spacing.
  struct MistralOptions {
    std::string_view leading_space;   // before "[INST]" and "[/INST]" (v1)
    std::string_view trailing_space;  // after "[INST]", before answers (not tekken)
    bool trim_answers = false;        // v3
  };

  ChatTemplate(bool recognized, Style style, std::optional<std::string> default_system_prompt,
               Llama2Options llama2, MistralOptions mistral)
      : recognized_(recognized),
        style_(style),
        default_system_prompt_(std::move(default_system_prompt)),
        llama2_(llama2),
        mistral_(mistral) {}

  static ChatTemplate FromMistralJinja(std::string_view jinja);

  void RenderChatMl(absl::Span<const ChatMessage> messages, bool add_generation_prompt,
                    std::string* out) const;
  void RenderLlama2(absl::Span<const ChatMessage> messages, std::string* out) const;
  void RenderMistral(absl::Span<const ChatMessage> messages, std::string* out) const;
  absl::Status RenderGemma(absl::Span<const ChatMessage> messages, bool add_generation_prompt,
                           std::string* out) const;

  bool recognized_;
  Style style_;
  std::optional<std::string> default_system_prompt_;
  Llama2Options llama2_;
  MistralOptions mistral_;
  std::string end_of_turn_;  // kZephyr
  std::optional<HermesToolFormat> tool_format_;  // kChatMl with tool calling
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_TEXT_CHAT_TEMPLATE_H_
