// Reading an OpenAI request body (parsed as ordered JSON, so objects keep
// the client's key order): a field that may be absent or null, and the
// error for one of the wrong type. Shared by the request, constraint and
// tools parsers.
#ifndef PDSERVE_ROUTER_API_OPENAI_OPENAI_JSON_H_
#define PDSERVE_ROUTER_API_OPENAI_OPENAI_JSON_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "router/api/openai/openai_error.h"

namespace pdserve::router::openai {

// The field `key` of `j`, or nullptr when absent or null (OpenAI clients
// send null for "unset").
inline const nlohmann::ordered_json* Field(const nlohmann::ordered_json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// INVALID_ARGUMENT naming `param`: "'param' must be <want>".
inline absl::Status WrongType(const std::string& param, absl::string_view want) {
  return InvalidParam(param, absl::StrCat("'", param, "' must be ", want));
}

}  // namespace pdserve::router::openai

#endif  // PDSERVE_ROUTER_API_OPENAI_OPENAI_JSON_H_
