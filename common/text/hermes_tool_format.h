// HermesToolFormat: tool calling as ChatML templates in the Hermes style
// write it (Qwen2.5, Hermes 2/3): the tools are listed in the system turn
// between <tools></tools> as one JSON object per line, the assistant calls
// them as
//   <tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>
// (several calls one after another, each on its own lines), and a run of
// tool results is one user turn of <tool_response>\n...\n</tool_response>
// blocks. The rendering is byte-identical to what the Jinja template
// renders (as transformers' apply_chat_template and vLLM feed the model).
//
// The prose around the tool list (the instructions the model was trained
// on) is read from the template's own string literals, never hard-coded,
// so a template with other wording renders its own.
//
// Immutable after construction; thread-safe.
#ifndef PDSERVE_COMMON_TEXT_HERMES_TOOL_FORMAT_H_
#define PDSERVE_COMMON_TEXT_HERMES_TOOL_FORMAT_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/types/span.h"

namespace pdserve {

struct ChatMessage;

class HermesToolFormat {
 public:
  // The markers a call is written between.
  static constexpr std::string_view kCallBegin = "<tool_call>";
  static constexpr std::string_view kCallEnd = "</tool_call>";

  // The format of a ChatML Jinja template, or nullopt when the template
  // has no Hermes-style tool calling.
  static std::optional<HermesToolFormat> FromJinja(std::string_view jinja);

  // Renders `messages` with `tools` (each one tool's JSON as the template's
  // tojson writes it; may be empty). `default_system` is the system text
  // used when the first message is not a system message.
  void Render(absl::Span<const ChatMessage> messages, absl::Span<const std::string> tools,
              const std::optional<std::string>& default_system, bool add_generation_prompt,
              std::string* out) const;

  // The text of one call as the assistant writes it, `arguments` being a
  // JSON object as tojson writes it.
  static std::string CallText(std::string_view name, std::string_view arguments);

 private:
  HermesToolFormat(std::string tools_head, std::string tools_tail)
      : tools_head_(std::move(tools_head)), tools_tail_(std::move(tools_tail)) {}

  void RenderSystem(absl::Span<const ChatMessage> messages, absl::Span<const std::string> tools,
                    const std::optional<std::string>& default_system, std::string* out) const;

  std::string tools_head_;  // after the system text, up to and with "<tools>"
  std::string tools_tail_;  // from "\n</tools>" to the end of the system turn
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_TEXT_HERMES_TOOL_FORMAT_H_
