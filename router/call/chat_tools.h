// ChatTools: a chat request's tools, tool choice and past tool calls,
// checked and made ready for the model's chat template and the grammar.
//
// Tools are written into the prompt as the template's `tojson` writes them
// (Python's json.dumps: ", " and ": " separators, UTF-8 kept, keys in the
// client's order), so the prompt is the one the model was trained on and
// the one transformers or vLLM would render. `required` and a named
// function are enforced with an XGrammar structural tag: each call is
//   <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
// with ARGS following that tool's parameter schema, so the call always
// parses and names a real tool. `auto` leaves the model free; `none` does
// not show the tools at all.
//
// Limits (INVALID_ARGUMENT beyond them): kMaxTools tools, kMaxToolBytes of
// tool definitions in all, names of 1 to 64 [A-Za-z0-9_-], parameters a
// JSON object.
#ifndef PDSERVE_ROUTER_CALL_CHAT_TOOLS_H_
#define PDSERVE_ROUTER_CALL_CHAT_TOOLS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/text/chat_template.h"
#include "pdserve/v1/generation.pb.h"

namespace pdserve::router {

inline constexpr int kMaxTools = 128;
inline constexpr int kMaxToolBytes = 64 * 1024;

struct PreparedChat {
  std::vector<ChatMessage> messages;
  std::vector<std::string> tools;  // as the template shows them; empty for none
  // The structural-tag grammar that `required` or a named function impose.
  std::optional<std::string> tool_grammar;
};

// Checks `chat` and converts it. `supports_tools`: whether the model's
// template has tool calling (a request with tools is refused otherwise).
absl::StatusOr<PreparedChat> PrepareChat(const v1::ChatInput& chat, bool supports_tools);

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_CHAT_TOOLS_H_
