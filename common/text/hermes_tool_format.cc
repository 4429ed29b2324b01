#include "common/text/hermes_tool_format.h"

#include <initializer_list>

#include "common/text/chat_template.h"
#include "common/text/jinja_literal.h"

namespace pdserve {
namespace {

constexpr std::string_view kListOpen = "<tools>";
constexpr std::string_view kListClose = "</tools>";

void Append(std::string* out, std::initializer_list<std::string_view> parts) {
  for (const std::string_view p : parts) out->append(p);
}

void AppendTurn(std::string_view role, std::string_view content, std::string* out) {
  Append(out, {"<|im_start|>", role, "\n", content, "<|im_end|>\n"});
}

// The literal that ends with "<tools>": the instructions before the list.
std::optional<std::string> FindHead(std::string_view t) {
  for (size_t at = t.find(kListOpen); at != std::string_view::npos;
       at = t.find(kListOpen, at + 1)) {
    const size_t close = at + kListOpen.size();
    if (std::optional<std::string> s = ReadJinjaStringEndingAt(t, close)) return s;
  }
  return std::nullopt;
}

// The literal that starts with a newline and "</tools>": the instructions
// after the list, to the end of the system turn.
std::optional<std::string> FindTail(std::string_view t) {
  for (std::string_view newline : {std::string_view("\\n"), std::string_view("\n")}) {
    const std::string opening = std::string(newline) + std::string(kListClose);
    for (size_t at = t.find(opening); at != std::string_view::npos;
         at = t.find(opening, at + 1)) {
      if (at == 0 || (t[at - 1] != '"' && t[at - 1] != '\'')) continue;
      std::optional<std::string> s = ReadJinjaString(t, at - 1);
      if (s.has_value() && s->ends_with("<|im_end|>\n")) return s;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<HermesToolFormat> HermesToolFormat::FromJinja(std::string_view jinja) {
  if (jinja.find(kCallBegin) == std::string_view::npos ||
      jinja.find("<tool_response>") == std::string_view::npos) {
    return std::nullopt;
  }
  std::optional<std::string> head = FindHead(jinja);
  std::optional<std::string> tail = FindTail(jinja);
  if (!head.has_value() || !tail.has_value()) return std::nullopt;
  return HermesToolFormat(*std::move(head), *std::move(tail));
}

std::string HermesToolFormat::CallText(std::string_view name, std::string_view arguments) {
  std::string out;
  Append(&out, {kCallBegin, "\n{\"name\": \"", name, "\", \"arguments\": ", arguments, "}\n",
                kCallEnd});
  return out;
}

void HermesToolFormat::RenderSystem(absl::Span<const ChatMessage> messages,
                                    absl::Span<const std::string> tools,
                                    const std::optional<std::string>& default_system,
                                    std::string* out) const {
  const bool first_is_system = messages[0].role == "system";
  if (tools.empty()) {
    if (first_is_system) {
      AppendTurn("system", messages[0].content, out);
    } else if (default_system.has_value()) {
      AppendTurn("system", *default_system, out);
    }
    return;
  }
  out->append("<|im_start|>system\n");
  out->append(first_is_system ? std::string_view(messages[0].content)
                              : std::string_view(default_system.value_or("")));
  out->append(tools_head_);
  for (const std::string& tool : tools) Append(out, {"\n", tool});
  out->append(tools_tail_);
}

void HermesToolFormat::Render(absl::Span<const ChatMessage> messages,
                              absl::Span<const std::string> tools,
                              const std::optional<std::string>& default_system,
                              bool add_generation_prompt, std::string* out) const {
  RenderSystem(messages, tools, default_system, out);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system" && i == 0) continue;  // written above
    if (m.role == "tool") {
      const bool opens = i == 0 || messages[i - 1].role != "tool";
      const bool closes = i + 1 == messages.size() || messages[i + 1].role != "tool";
      if (opens) out->append("<|im_start|>user");
      Append(out, {"\n<tool_response>\n", m.content, "\n</tool_response>"});
      if (closes) out->append("<|im_end|>\n");
      continue;
    }
    if (m.role != "assistant" || m.tool_calls.empty()) {
      AppendTurn(m.role, m.content, out);
      continue;
    }
    out->append("<|im_start|>assistant");
    if (!m.content.empty()) Append(out, {"\n", m.content});
    for (const ChatToolCall& call : m.tool_calls) {
      Append(out, {"\n", CallText(call.name, call.arguments)});
    }
    out->append("<|im_end|>\n");
  }
  if (add_generation_prompt) out->append("<|im_start|>assistant\n");
}

}  // namespace pdserve
