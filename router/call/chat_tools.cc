#include "router/call/chat_tools.h"

#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/text/hermes_tool_format.h"
#include "nlohmann/json.hpp"

namespace pdserve::router {
namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr int kMaxJsonDepth = 64;
constexpr size_t kMaxNameLength = 64;

// Parses a JSON object, keeping its keys in the order given; nullopt if
// the text is not one (or is nested too deep to be a real schema).
std::optional<OrderedJson> ParseObject(const std::string& text) {
  bool too_deep = false;
  OrderedJson::parser_callback_t guard = [&too_deep](int depth, OrderedJson::parse_event_t,
                                                     OrderedJson&) {
    if (depth > kMaxJsonDepth) too_deep = true;
    return !too_deep;
  };
  OrderedJson j = OrderedJson::parse(text, guard, /*allow_exceptions=*/false);
  if (too_deep || j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

// json.dumps(j, ensure_ascii=False): ", " between items, ": " after keys.
void AppendPythonJson(const OrderedJson& j, std::string* out) {
  if (j.is_object()) {
    out->push_back('{');
    bool first = true;
    for (const auto& [key, value] : j.items()) {
      if (!first) out->append(", ");
      first = false;
      out->append(OrderedJson(key).dump());
      out->append(": ");
      AppendPythonJson(value, out);
    }
    out->push_back('}');
  } else if (j.is_array()) {
    out->push_back('[');
    for (size_t i = 0; i < j.size(); ++i) {
      if (i > 0) out->append(", ");
      AppendPythonJson(j[i], out);
    }
    out->push_back(']');
  } else {
    out->append(j.dump());
  }
}

std::string PythonJson(const OrderedJson& j) {
  std::string out;
  AppendPythonJson(j, &out);
  return out;
}

absl::Status CheckName(const std::string& name, const std::string& where) {
  bool ok = !name.empty() && name.size() <= kMaxNameLength;
  for (char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '-');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(where, " = \"", name.substr(0, kMaxNameLength),
                                                 "\": a tool's name must be 1 to ", kMaxNameLength,
                                                 " letters, digits, '_' or '-'"));
}

struct CheckedTool {
  std::string name;
  OrderedJson parameters;  // a JSON Schema object
  std::string rendered;    // as the template shows it
};

absl::StatusOr<CheckedTool> CheckTool(const v1::Tool& tool, int i) {
  const std::string where = absl::StrCat("tools[", i, "]");
  RETURN_IF_ERROR(CheckName(tool.name(), where + ".name"));
  CheckedTool out{.name = tool.name(), .parameters = OrderedJson::object(), .rendered = {}};
  OrderedJson function = OrderedJson::object();
  function["name"] = tool.name();
  if (!tool.description().empty()) function["description"] = tool.description();
  if (!tool.parameters().empty()) {
    std::optional<OrderedJson> parameters = ParseObject(tool.parameters());
    if (!parameters.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".parameters must be a JSON Schema object"));
    }
    out.parameters = *parameters;
    function["parameters"] = *std::move(parameters);
  }
  out.rendered = PythonJson(OrderedJson{{"type", "function"}, {"function", std::move(function)}});
  return out;
}

// One call of `tool`, its arguments following the tool's parameters.
OrderedJson CallTag(const CheckedTool& tool) {
  const std::string call = HermesToolFormat::CallText(tool.name, "\x01");
  const size_t hole = call.find('\x01');
  OrderedJson schema = tool.parameters;
  if (schema.empty()) schema = OrderedJson{{"type", "object"}};
  return OrderedJson{{"type", "tag"},
                     {"begin", call.substr(0, hole)},
                     {"content", {{"type", "json_schema"}, {"json_schema", std::move(schema)}}},
                     {"end", call.substr(hole + 1)}};
}

absl::StatusOr<std::string> ToolGrammar(const v1::ToolChoice& choice,
                                        const std::vector<CheckedTool>& tools) {
  OrderedJson format;
  if (choice.mode() == v1::ToolChoice::FUNCTION) {
    const CheckedTool* named = nullptr;
    for (const CheckedTool& t : tools) {
      if (t.name == choice.function()) named = &t;
    }
    if (named == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tool_choice names function \"", choice.function(), "\", which is not in tools"));
    }
    format = CallTag(*named);
  } else {
    OrderedJson tags = OrderedJson::array();
    for (const CheckedTool& t : tools) tags.push_back(CallTag(t));
    // Calls one after another on their own lines, as the template writes
    // them; without `parallel`, the first call ends the answer.
    format = {{"type", "tags_with_separator"},
              {"tags", std::move(tags)},
              {"separator", "\n"},
              {"at_least_one", true},
              {"stop_after_first", !choice.parallel()}};
  }
  return OrderedJson{{"type", "structural_tag"}, {"format", std::move(format)}}.dump();
}

absl::StatusOr<ChatMessage> ConvertMessage(const v1::ChatMessage& m, int i) {
  ChatMessage out{.role = m.role(), .content = m.content()};
  for (int c = 0; c < m.tool_calls_size(); ++c) {
    const v1::ToolCall& call = m.tool_calls(c);
    const std::string where = absl::StrCat("messages[", i, "].tool_calls[", c, "]");
    if (m.role() != "assistant") {
      return absl::InvalidArgumentError(absl::StrCat(where, ": only assistant turns call tools"));
    }
    RETURN_IF_ERROR(CheckName(call.name(), where + ".name"));
    std::optional<OrderedJson> arguments =
        call.arguments().empty() ? OrderedJson::object() : ParseObject(call.arguments());
    if (!arguments.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".arguments must be a JSON object (as text)"));
    }
    out.tool_calls.push_back({call.name(), PythonJson(*arguments)});
  }
  return out;
}

absl::Status CheckChoice(const v1::ChatInput& chat) {
  const v1::ToolChoice::Mode mode = chat.tool_choice().mode();
  if (chat.tools().empty() &&
      (mode == v1::ToolChoice::REQUIRED || mode == v1::ToolChoice::FUNCTION)) {
    return absl::InvalidArgumentError("tool_choice requires tools");
  }
  if (chat.tools_size() > kMaxTools) {
    return absl::InvalidArgumentError(absl::StrCat("tools has ", chat.tools_size(),
                                                   " tools; at most ", kMaxTools, " are allowed"));
  }
  size_t bytes = 0;
  for (const v1::Tool& t : chat.tools()) {
    bytes += t.name().size() + t.description().size() + t.parameters().size();
  }
  if (bytes > kMaxToolBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("tools take ", bytes, " bytes; at most ", kMaxToolBytes, " are allowed"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PreparedChat> PrepareChat(const v1::ChatInput& chat, bool supports_tools) {
  RETURN_IF_ERROR(CheckChoice(chat));
  PreparedChat out;
  out.messages.reserve(chat.messages_size());
  for (int i = 0; i < chat.messages_size(); ++i) {
    ASSIGN_OR_RETURN(ChatMessage m, ConvertMessage(chat.messages(i), i));
    out.messages.push_back(std::move(m));
  }
  if (chat.tools().empty() || chat.tool_choice().mode() == v1::ToolChoice::NONE) return out;
  if (!supports_tools) {
    return absl::InvalidArgumentError(
        "this model's chat template has no tool calling: 'tools' cannot be used with it");
  }
  std::vector<CheckedTool> tools;
  std::set<std::string> names;
  for (int i = 0; i < chat.tools_size(); ++i) {
    ASSIGN_OR_RETURN(CheckedTool t, CheckTool(chat.tools(i), i));
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tools[", i, "]: a second tool named \"", t.name, "\""));
    }
    out.tools.push_back(t.rendered);
    tools.push_back(std::move(t));
  }
  if (chat.tool_choice().mode() != v1::ToolChoice::AUTO) {
    ASSIGN_OR_RETURN(out.tool_grammar, ToolGrammar(chat.tool_choice(), tools));
  }
  return out;
}

}  // namespace pdserve::router
