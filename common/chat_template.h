// ChatTemplate: turns a list of chat messages into the prompt text the
// model was trained on.
//
// We do not implement Jinja. Instead the model's `tokenizer.chat_template`
// is recognised: a template that mentions "<|im_start|>" is ChatML,
//   <|im_start|>{role}\n{content}<|im_end|>\n ... [<|im_start|>assistant\n]
// and if it also contains a literal "<|im_start|>system\n...<|im_end|>\n"
// block guarded by a test on messages[0] (SmolLM2, Qwen2.5), that block is
// the default system prompt, emitted when the first message is not a
// system message. Its text is read from the template, never hard-coded.
// The result is byte-identical to what the Jinja template renders (and to
// what llama-cpp-python's create_chat_completion feeds the model).
//
// Documented fallback: a missing or non-ChatML template renders as plain
// ChatML without a default system prompt, with a LOG(WARNING) at load time;
// the model may then see a prompt format it was not trained on.
//
// Message contents are inserted verbatim, so text such as "<|im_end|>" in a
// message is tokenized as that special token when the prompt is encoded
// with parse_special, exactly as with the Jinja template.
//
// Immutable after construction; Render() is const and thread-safe.
#ifndef PDSERVE_COMMON_CHAT_TEMPLATE_H_
#define PDSERVE_COMMON_CHAT_TEMPLATE_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/gguf_file.h"

namespace pdserve {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
};

class ChatTemplate {
 public:
  // Reads `tokenizer.chat_template`; INVALID_ARGUMENT if it is present but
  // not a string. A missing template takes the fallback.
  static absl::StatusOr<ChatTemplate> FromGguf(const GgufFile& gguf);
  // Recognises a Jinja template string (see the file comment).
  static ChatTemplate FromJinja(std::string_view jinja);

  // INVALID_ARGUMENT for an empty list or an unknown role.
  absl::StatusOr<std::string> Render(absl::Span<const ChatMessage> messages,
                                     bool add_generation_prompt) const;

  // False when the template was not recognised and the fallback is in use.
  bool recognized() const { return recognized_; }
  const std::optional<std::string>& default_system_prompt() const { return default_system_prompt_; }

 private:
  ChatTemplate(bool recognized, std::optional<std::string> default_system_prompt)
      : recognized_(recognized), default_system_prompt_(std::move(default_system_prompt)) {}

  bool recognized_;
  std::optional<std::string> default_system_prompt_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_CHAT_TEMPLATE_H_
