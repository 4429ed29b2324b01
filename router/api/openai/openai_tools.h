// OpenAI's tool calling in a chat request: `tools` (functions with a name,
// description and JSON-Schema parameters), `tool_choice` ("auto", "none",
// "required" or {"type": "function", "function": {"name": ...}}),
// `parallel_tool_calls`, and the conversation's past calls (assistant
// `tool_calls`, whose `arguments` is JSON text) and results (`tool`
// messages), onto GenerateRequest's ChatInput. Whether the model's chat
// template can call tools, the limits and the grammar that enforces a
// choice are the router's (chat_tools.h), for both APIs alike.
#ifndef PDSERVE_ROUTER_API_OPENAI_OPENAI_TOOLS_H_
#define PDSERVE_ROUTER_API_OPENAI_OPENAI_TOOLS_H_

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "pdserve/v1/generation.pb.h"

namespace pdserve::router::openai {

// Sets `chat`'s tools and tool choice from the request body `j`.
absl::Status ParseTools(const nlohmann::ordered_json& j, v1::ChatInput* chat);

// An assistant message's `tool_calls` onto `message`; `where` names it.
absl::Status ParseToolCalls(const nlohmann::ordered_json& calls, const std::string& where,
                            v1::ChatMessage* message);

// Whether the answer is to be read for tool calls (tools given, not "none").
bool CallsTools(const v1::ChatInput& chat);

}  // namespace pdserve::router::openai

#endif  // PDSERVE_ROUTER_API_OPENAI_OPENAI_TOOLS_H_
