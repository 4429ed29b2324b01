#include "router/api/openai/openai_constraint.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "router/api/openai/openai_error.h"
#include "router/api/openai/openai_json.h"

namespace pdserve::router::openai {
namespace {

using Json = nlohmann::ordered_json;

// A schema given as an object (or, as some clients send it, a JSON string).
absl::StatusOr<std::string> SchemaText(const Json& schema, const std::string& param) {
  if (schema.is_object() || schema.is_boolean()) return schema.dump();
  if (schema.is_string()) return schema.get<std::string>();
  return WrongType(param, "a JSON Schema (an object)");
}

absl::StatusOr<std::optional<v1::Constraint>> FromResponseFormat(const Json& f) {
  if (!f.is_object()) return WrongType("response_format", "an object");
  const Json* type = Field(f, "type");
  if (type == nullptr || !type->is_string()) return WrongType("response_format.type", "a string");
  v1::Constraint c;
  if (*type == "text") return std::nullopt;
  if (*type == "json_object") {
    c.set_json_object(true);
    return c;
  }
  if (*type != "json_schema") {
    return InvalidParam("response_format.type",
                        absl::StrCat("'response_format.type' = ", type->dump(),
                                     ": must be text, json_object or json_schema"));
  }
  const Json* spec = Field(f, "json_schema");
  if (spec == nullptr || !spec->is_object()) {
    return WrongType("response_format.json_schema", "an object with a 'schema'");
  }
  // `strict` is accepted either way: the answer always follows the schema.
  const Json* schema = Field(*spec, "schema");
  if (schema == nullptr) {
    return InvalidParam("response_format.json_schema.schema",
                        "'response_format.json_schema.schema' is required");
  }
  ASSIGN_OR_RETURN(std::string text, SchemaText(*schema, "response_format.json_schema.schema"));
  c.set_json_schema(std::move(text));
  return c;
}

absl::StatusOr<v1::Constraint> FromChoice(const Json& choice) {
  if (!choice.is_array() || choice.empty()) {
    return WrongType("guided_choice", "a non-empty array of strings");
  }
  std::vector<std::string> choices;
  for (const Json& s : choice) {
    if (!s.is_string()) return WrongType("guided_choice", "a non-empty array of strings");
    choices.push_back(s.get<std::string>());
  }
  v1::Constraint c;
  c.set_regex(ChoiceRegex(choices));
  return c;
}

// The one constraint field `key` gives, if present.
absl::StatusOr<std::optional<v1::Constraint>> FromField(const Json& j, const char* key) {
  const Json* v = Field(j, key);
  if (v == nullptr) return std::nullopt;
  const std::string name = key;
  if (name == "response_format") return FromResponseFormat(*v);
  if (name == "guided_choice") return FromChoice(*v);
  v1::Constraint c;
  if (name == "guided_json" || name == "json_schema") {
    ASSIGN_OR_RETURN(std::string text, SchemaText(*v, name));
    c.set_json_schema(std::move(text));
    return c;
  }
  if (!v->is_string()) return WrongType(name, "a string");
  if (name == "guided_regex") {
    c.set_regex(v->get<std::string>());
  } else {  // guided_grammar, grammar: GBNF / EBNF
    c.set_ebnf(v->get<std::string>());
  }
  return c;
}

}  // namespace

std::string ChoiceRegex(const std::vector<std::string>& choices) {
  std::string out = "(";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += "|";
    for (char ch : choices[i]) {
      if (absl::string_view("\\^$.|?*+()[]{}/-").find(ch) != absl::string_view::npos) out += '\\';
      out += ch;
    }
  }
  return out + ")";
}

absl::Status ParseConstraint(const Json& j, v1::SamplingParams* sampling) {
  const char* given = nullptr;
  for (const char* key : {"response_format", "guided_json", "guided_regex", "guided_grammar",
                          "guided_choice", "json_schema", "grammar"}) {
    ASSIGN_OR_RETURN(std::optional<v1::Constraint> c, FromField(j, key));
    if (!c.has_value()) continue;
    if (given != nullptr) {
      return InvalidParam(key, absl::StrCat("'", key, "' and '", given,
                                            "' both constrain the answer: give one of them"));
    }
    given = key;
    *sampling->mutable_constraint() = *std::move(c);
  }
  return absl::OkStatus();
}

}  // namespace pdserve::router::openai
