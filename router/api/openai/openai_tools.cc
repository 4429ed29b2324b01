#include "router/api/openai/openai_tools.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "router/api/openai/openai_error.h"
#include "router/api/openai/openai_json.h"

namespace pdserve::router::openai {
namespace {

using Json = nlohmann::ordered_json;

absl::StatusOr<std::string> StringField(const Json& j, const char* key, const std::string& where,
                                        bool required) {
  const Json* v = Field(j, key);
  const std::string param = absl::StrCat(where, ".", key);
  if (v == nullptr) {
    if (required) return InvalidParam(param, absl::StrCat("'", param, "' is required"));
    return std::string();
  }
  if (!v->is_string()) return WrongType(param, "a string");
  return v->get<std::string>();
}

// {"type": "function", "function": {...}}: the function part, checked.
absl::StatusOr<const Json*> FunctionOf(const Json& item, const std::string& where) {
  if (!item.is_object()) return WrongType(where, "an object");
  const Json* type = Field(item, "type");
  if (type != nullptr && *type != "function") {
    return InvalidParam(where + ".type", absl::StrCat("'", where, ".type' must be \"function\""));
  }
  const Json* function = Field(item, "function");
  if (function == nullptr || !function->is_object()) {
    return WrongType(where + ".function", "an object");
  }
  return function;
}

absl::Status ParseTool(const Json& item, const std::string& where, v1::Tool* tool) {
  ASSIGN_OR_RETURN(const Json* f, FunctionOf(item, where));
  const std::string fwhere = where + ".function";
  ASSIGN_OR_RETURN(*tool->mutable_name(), StringField(*f, "name", fwhere, true));
  ASSIGN_OR_RETURN(*tool->mutable_description(), StringField(*f, "description", fwhere, false));
  if (const Json* p = Field(*f, "parameters"); p != nullptr) {
    if (!p->is_object()) return WrongType(fwhere + ".parameters", "a JSON Schema object");
    tool->set_parameters(p->dump());
  }
  // `strict` is accepted either way: a forced call always follows the
  // parameters' schema.
  return absl::OkStatus();
}

absl::Status ParseChoice(const Json& j, v1::ToolChoice* choice) {
  const Json* c = Field(j, "tool_choice");
  if (c == nullptr) return absl::OkStatus();
  if (c->is_string()) {
    if (*c == "auto") {
      choice->set_mode(v1::ToolChoice::AUTO);
    } else if (*c == "none") {
      choice->set_mode(v1::ToolChoice::NONE);
    } else if (*c == "required") {
      choice->set_mode(v1::ToolChoice::REQUIRED);
    } else {
      return InvalidParam("tool_choice",
                          absl::StrCat("'tool_choice' = ", c->dump(),
                                       ": must be none, auto, required or a named function"));
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const Json* f, FunctionOf(*c, "tool_choice"));
  ASSIGN_OR_RETURN(*choice->mutable_function(),
                   StringField(*f, "name", "tool_choice.function", true));
  choice->set_mode(v1::ToolChoice::FUNCTION);
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseTools(const Json& j, v1::ChatInput* chat) {
  if (const Json* tools = Field(j, "tools"); tools != nullptr) {
    if (!tools->is_array()) return WrongType("tools", "an array of tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      RETURN_IF_ERROR(ParseTool((*tools)[i], absl::StrCat("tools[", i, "]"), chat->add_tools()));
    }
  }
  v1::ToolChoice* choice = chat->mutable_tool_choice();
  RETURN_IF_ERROR(ParseChoice(j, choice));
  const Json* parallel = Field(j, "parallel_tool_calls");
  if (parallel != nullptr && !parallel->is_boolean()) {
    return WrongType("parallel_tool_calls", "a boolean");
  }
  // OpenAI's default: the model may make several calls at once.
  choice->set_parallel(parallel == nullptr || parallel->get<bool>());
  return absl::OkStatus();
}

absl::Status ParseToolCalls(const Json& calls, const std::string& where, v1::ChatMessage* message) {
  if (!calls.is_array()) return WrongType(where, "an array");
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string at = absl::StrCat(where, "[", i, "]");
    ASSIGN_OR_RETURN(const Json* f, FunctionOf(calls[i], at));
    v1::ToolCall* call = message->add_tool_calls();
    ASSIGN_OR_RETURN(*call->mutable_id(), StringField(calls[i], "id", at, false));
    ASSIGN_OR_RETURN(*call->mutable_name(), StringField(*f, "name", at + ".function", true));
    const Json* arguments = Field(*f, "arguments");
    if (arguments == nullptr) continue;
    // JSON text, as OpenAI sends it; some clients send the object itself.
    if (arguments->is_string()) {
      call->set_arguments(arguments->get<std::string>());
    } else if (arguments->is_object()) {
      call->set_arguments(arguments->dump());
    } else {
      return WrongType(at + ".function.arguments", "a JSON object as a string");
    }
  }
  return absl::OkStatus();
}

bool CallsTools(const v1::ChatInput& chat) {
  return !chat.tools().empty() && chat.tool_choice().mode() != v1::ToolChoice::NONE;
}

}  // namespace pdserve::router::openai
