#include "common/text/chat_template.h"

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/text/hermes_tool_format.h"
#include "common/text/jinja_literal.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

constexpr std::string_view kTemplateKey = "tokenizer.chat_template";
constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";
constexpr std::string_view kSystemBlockHead = "<|im_start|>system\n";
constexpr std::string_view kSystemBlockTail = "<|im_end|>\n";

// The default system prompt is a whole string literal that is exactly one
// system turn, in a template that branches on the first message. A literal
// that only opens a turn ('<|im_start|>system\n' + ...) does not qualify.
std::optional<std::string> FindDefaultSystemPrompt(std::string_view t) {
  if (t.find("messages[0]") == std::string_view::npos) return std::nullopt;
  // The newline may be written as a real newline or as "\n" in the source.
  constexpr std::string_view kOpening = "<|im_start|>system";
  for (size_t at = t.find(kOpening); at != std::string_view::npos; at = t.find(kOpening, at + 1)) {
    if (at == 0 || (t[at - 1] != '\'' && t[at - 1] != '"')) continue;
    const std::optional<std::string> literal = ReadJinjaString(t, at - 1);
    if (!literal || !literal->starts_with(kSystemBlockHead) ||
        !literal->ends_with(kSystemBlockTail)) {
      continue;
    }
    std::string_view body(*literal);
    body.remove_prefix(kSystemBlockHead.size());
    body.remove_suffix(kSystemBlockTail.size());
    if (body.find(kImStart) != std::string_view::npos ||
        body.find(kImEnd) != std::string_view::npos) {
      continue;
    }
    return std::string(body);
  }
  return std::nullopt;
}

void AppendTurn(std::string_view role, std::string_view content, std::string* out) {
  out->append(kImStart);
  out->append(role);
  out->push_back('\n');
  out->append(content);
  out->append(kImEnd);
  out->push_back('\n');
}

// absl::StrAppend would need absl::string_view, which this abseil build
// keeps apart from std::string_view.
void Append(std::string* out, std::initializer_list<std::string_view> parts) {
  for (const std::string_view p : parts) out->append(p);
}

// ASCII whitespace trimmed off both ends, as llama.cpp's trim().
std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

void RenderLlama3(absl::Span<const ChatMessage> messages, bool add_generation_prompt,
                  std::string* out) {
  for (const ChatMessage& m : messages) {
    Append(out,
           {"<|start_header_id|>", m.role, "<|end_header_id|>\n\n", Trim(m.content), "<|eot_id|>"});
  }
  if (add_generation_prompt) out->append("<|start_header_id|>assistant<|end_header_id|>\n\n");
}

void RenderMistralV7(absl::Span<const ChatMessage> messages, std::string* out) {
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      Append(out, {"[SYSTEM_PROMPT] ", m.content, "[/SYSTEM_PROMPT]"});
    } else if (m.role == "user") {
      Append(out, {"[INST] ", m.content, "[/INST]"});
    } else {
      Append(out, {" ", m.content, "</s>"});
    }
  }
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

bool IsKnownRole(std::string_view role) {
  return role == "system" || role == "user" || role == "assistant" || role == "tool";
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromGguf(const GgufFile& gguf,
                                                    std::string_view eos_text) {
  if (gguf.Find(kTemplateKey) == nullptr) {
    LOG(INFO) << "model has no " << kTemplateKey << ": chat requests are refused";
    return ChatTemplate(false, Style::kNone, std::nullopt, {}, {});
  }
  ASSIGN_OR_RETURN(const std::string_view jinja, gguf.GetString(kTemplateKey));
  return FromJinja(jinja, eos_text);
}

ChatTemplate ChatTemplate::FromJinja(std::string_view jinja, std::string_view eos_text) {
  if (Contains(jinja, kImStart) && !Contains(jinja, "<|im_sep|>")) {
    ChatTemplate t(true, Style::kChatMl, FindDefaultSystemPrompt(jinja), {}, {});
    t.tool_format_ = HermesToolFormat::FromJinja(jinja);
    return t;
  }
  if (Contains(jinja, "[INST]") && !Contains(jinja, kImStart)) {
    const bool mistral = Contains(jinja, "[SYSTEM_PROMPT]") ||
                         Contains(jinja, "' [INST] ' + system_message") ||
                         Contains(jinja, "[AVAILABLE_TOOLS]");
    if (mistral) return FromMistralJinja(jinja);
    // llama.cpp's variants, in its order: -sys-strip, -sys-bos, -sys, plain.
    Llama2Options options;
    if (Contains(jinja, "content.strip()")) {
      options = {.system = true, .strip = true};
    } else if (Contains(jinja, "bos_token + '[INST]")) {
      options = {.system = true, .bos_in_history = true};
    } else {
      options = {.system = Contains(jinja, "<<SYS>>")};
    }
    return ChatTemplate(true, Style::kLlama2, std::nullopt, options, {});
  }
  if (Contains(jinja, "<|assistant|>") && Contains(jinja, "<|user|>") &&
      !Contains(jinja, "<|end|>")) {
    ChatTemplate t(true, Style::kZephyr, std::nullopt, {}, {});
    if (Contains(jinja, "eos_token")) {
      t.end_of_turn_ = std::string(eos_text);
    } else if (Contains(jinja, "<|endoftext|>")) {
      t.end_of_turn_ = "<|endoftext|>";
    }
    return t;
  }
  if (Contains(jinja, "<|start_header_id|>") && Contains(jinja, "<|end_header_id|>")) {
    return ChatTemplate(true, Style::kLlama3, std::nullopt, {}, {});
  }
  if (Contains(jinja, "<start_of_turn>")) {
    return ChatTemplate(true, Style::kGemma, std::nullopt, {}, {});
  }
  LOG(WARNING) << "chat template is not ChatML, LLaMA 2/3, Mistral or Zephyr-style; falling back "
                  "to plain ChatML, which this model may not have been trained on";
  return ChatTemplate(false, Style::kChatMl, std::nullopt, {}, {});
}

// llama.cpp's mistral-v7, -v1, -v3-tekken and -v3, tested in that order.
ChatTemplate ChatTemplate::FromMistralJinja(std::string_view jinja) {
  if (Contains(jinja, "[SYSTEM_PROMPT]")) {
    return ChatTemplate(true, Style::kMistralV7, std::nullopt, {}, {});
  }
  MistralOptions options{.leading_space = "", .trailing_space = " ", .trim_answers = false};
  if (Contains(jinja, " [INST]")) {
    options.leading_space = " ";  // v1
  } else if (Contains(jinja, "\"[INST]\"")) {
    options.trailing_space = "";  // v3-tekken
  } else {
    options.trim_answers = true;  // v3
  }
  return ChatTemplate(true, Style::kMistral, std::nullopt, {}, options);
}

absl::StatusOr<std::string> ChatTemplate::Render(absl::Span<const ChatMessage> messages,
                                                 bool add_generation_prompt,
                                                 absl::Span<const std::string> tools) const {
  if (style_ == Style::kNone) {
    return absl::InvalidArgumentError(
        "the model has no chat template (a base model): send a plain-text prompt instead");
  }
  if (messages.empty()) return absl::InvalidArgumentError("chat has no messages");
  size_t size = 64;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!IsKnownRole(messages[i].role)) {
      return absl::InvalidArgumentError(
          absl::StrCat("message ", i, " has role '", messages[i].role,
                       "'; expected system, user, assistant or tool"));
    }
    if (!messages[i].tool_calls.empty() && !supports_tools()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "message ", i, " has tool calls, but this model's chat template has no tool calling"));
    }
    size += messages[i].role.size() + messages[i].content.size() + 32;
  }
  if (!tools.empty() && !supports_tools()) {
    return absl::InvalidArgumentError(
        "this model's chat template has no tool calling: 'tools' cannot be used with it");
  }
  for (const std::string& tool : tools) size += tool.size() + 1;
  std::string out;
  out.reserve(size);
  switch (style_) {
    case Style::kNone:
      break;
    case Style::kGemma:
      RETURN_IF_ERROR(RenderGemma(messages, add_generation_prompt, &out));
      break;
    case Style::kChatMl:
      if (tool_format_.has_value()) {
        tool_format_->Render(messages, tools, default_system_prompt_, add_generation_prompt, &out);
      } else {
        RenderChatMl(messages, add_generation_prompt, &out);
      }
      break;
    case Style::kLlama2:
      RenderLlama2(messages, &out);  // the prompt always ends open for the model
      break;
    case Style::kLlama3:
      RenderLlama3(messages, add_generation_prompt, &out);
      break;
    case Style::kMistral:
      RenderMistral(messages, &out);
      break;
    case Style::kMistralV7:
      RenderMistralV7(messages, &out);
      break;
    case Style::kZephyr:
      for (const ChatMessage& m : messages) {
        Append(&out, {"<|", m.role, "|>\n", m.content, end_of_turn_, "\n"});
      }
      if (add_generation_prompt) out.append("<|assistant|>\n");
      break;
  }
  return out;
}

void ChatTemplate::RenderChatMl(absl::Span<const ChatMessage> messages, bool add_generation_prompt,
                                std::string* out) const {
  if (default_system_prompt_.has_value() && messages[0].role != "system") {
    AppendTurn("system", *default_system_prompt_, out);
  }
  for (const ChatMessage& m : messages) AppendTurn(m.role, m.content, out);
  if (add_generation_prompt) {
    out->append(kImStart);
    out->append("assistant\n");
  }
}

// llama.cpp's llama2 family: the first "[INST] " is written up front (the
// tokenizer's BOS precedes it); a turn reopens after each answer.
void ChatTemplate::RenderLlama2(absl::Span<const ChatMessage> messages, std::string* out) const {
  out->append("[INST] ");
  bool inside_turn = true;
  for (const ChatMessage& m : messages) {
    const std::string_view content = llama2_.strip ? Trim(m.content) : m.content;
    if (!inside_turn) {
      inside_turn = true;
      out->append(llama2_.bos_in_history ? "<s>[INST] " : "[INST] ");
    }
    if (m.role == "system") {
      if (llama2_.system) {
        Append(out, {"<<SYS>>\n", content, "\n<</SYS>>\n\n"});
      } else {
        Append(out, {content, "\n"});
      }
    } else if (m.role == "user") {
      Append(out, {content, " [/INST]"});
    } else {
      Append(out, {content, "</s>"});
      inside_turn = false;
    }
  }
}

absl::Status ChatTemplate::RenderGemma(absl::Span<const ChatMessage> messages,
                                       bool add_generation_prompt, std::string* out) const {
  std::string first_user_prefix;
  if (messages[0].role == "system") {
    first_user_prefix = absl::StrCat(messages[0].content, "\n\n");
    messages.remove_prefix(1);
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if ((m.role == "user") != (i % 2 == 0)) {
      return absl::InvalidArgumentError(
          "this model's chat template needs roles to alternate user/assistant/user/...");
    }
    std::string_view role = m.role;
    if (role == "assistant") role = "model";
    Append(out, {"<start_of_turn>", role, "\n", i == 0 ? first_user_prefix : "", Trim(m.content),
                 "<end_of_turn>\n"});
  }
  if (add_generation_prompt) out->append("<start_of_turn>model\n");
  return absl::OkStatus();
}

void ChatTemplate::RenderMistral(absl::Span<const ChatMessage> messages, std::string* out) const {
  const MistralOptions& o = mistral_;
  bool inside_turn = false;
  for (const ChatMessage& m : messages) {
    if (!inside_turn) {
      Append(out, {o.leading_space, "[INST]", o.trailing_space});
      inside_turn = true;
    }
    if (m.role == "system") {
      Append(out, {m.content, "\n\n"});
    } else if (m.role == "user") {
      Append(out, {m.content, o.leading_space, "[/INST]"});
    } else {
      Append(out, {o.trailing_space, o.trim_answers ? Trim(m.content) : m.content, "</s>"});
      inside_turn = false;
    }
  }
}

}  // namespace pdserve
