#include "common/chat_template.h"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

constexpr std::string_view kTemplateKey = "tokenizer.chat_template";
constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";
constexpr std::string_view kSystemBlockHead = "<|im_start|>system\n";
constexpr std::string_view kSystemBlockTail = "<|im_end|>\n";

// Reads the Jinja string literal whose opening quote is at t[open] and
// returns its value with escapes resolved; nullopt if it never closes.
std::optional<std::string> ReadJinjaString(std::string_view t, size_t open) {
  const char quote = t[open];
  std::string value;
  for (size_t i = open + 1; i < t.size(); ++i) {
    const char c = t[i];
    if (c == quote) return value;
    if (c != '\\' || i + 1 == t.size()) {
      value += c;
      continue;
    }
    const char e = t[++i];
    value += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;  // \\ \' \" stay literal
  }
  return std::nullopt;
}

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

bool IsKnownRole(std::string_view role) {
  return role == "system" || role == "user" || role == "assistant" || role == "tool";
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromGguf(const GgufFile& gguf) {
  if (gguf.Find(kTemplateKey) == nullptr) {
    LOG(WARNING) << "model has no " << kTemplateKey << "; using plain ChatML";
    return ChatTemplate(false, std::nullopt);
  }
  ASSIGN_OR_RETURN(const std::string_view jinja, gguf.GetString(kTemplateKey));
  return FromJinja(jinja);
}

ChatTemplate ChatTemplate::FromJinja(std::string_view jinja) {
  if (jinja.find(kImStart) == std::string_view::npos) {
    LOG(WARNING) << "chat template is not ChatML; falling back to plain ChatML, which this model "
                    "may not have been trained on";
    return ChatTemplate(false, std::nullopt);
  }
  return ChatTemplate(true, FindDefaultSystemPrompt(jinja));
}

absl::StatusOr<std::string> ChatTemplate::Render(absl::Span<const ChatMessage> messages,
                                                 bool add_generation_prompt) const {
  if (messages.empty()) return absl::InvalidArgumentError("chat has no messages");
  size_t size = 64;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!IsKnownRole(messages[i].role)) {
      return absl::InvalidArgumentError(
          absl::StrCat("message ", i, " has role '", messages[i].role,
                       "'; expected system, user, assistant or tool"));
    }
    size += messages[i].role.size() + messages[i].content.size() + 32;
  }
  std::string out;
  out.reserve(size);
  if (default_system_prompt_.has_value() && messages[0].role != "system") {
    AppendTurn("system", *default_system_prompt_, &out);
  }
  for (const ChatMessage& m : messages) AppendTurn(m.role, m.content, &out);
  if (add_generation_prompt) {
    out.append(kImStart);
    out.append("assistant\n");
  }
  return out;
}

}  // namespace pdserve
