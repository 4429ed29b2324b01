#include "common/grammar/json_schema_support.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pdserve {
namespace {

using Json = nlohmann::json;

constexpr int kMaxDepth = 128;

constexpr const char* kUnenforced[] = {"multipleOf",
                                       "not",
                                       "if",
                                       "then",
                                       "else",
                                       "dependencies",
                                       "dependentRequired",
                                       "dependentSchemas",
                                       "contains",
                                       "minContains",
                                       "maxContains",
                                       "propertyNames",
                                       "patternProperties",
                                       "minProperties",
                                       "maxProperties",
                                       "unevaluatedItems",
                                       "unevaluatedProperties"};

constexpr const char* kNeedType[] = {
    "minimum",   "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
    "maxLength", "pattern", "format",           "minItems",         "maxItems"};

// Keywords whose value is one subschema, or a map or list of them.
constexpr const char* kSubschema[] = {"items", "additionalItems", "additionalProperties"};
constexpr const char* kSubschemaMaps[] = {"properties", "definitions", "$defs"};
constexpr const char* kSubschemaLists[] = {"anyOf", "oneOf", "allOf", "prefixItems", "items"};

absl::Status Refuse(const std::string& where, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("JSON schema at '", where.empty() ? "/" : where, "': ", why,
                   " (not enforced by the grammar engine, so the answer could break it)"));
}

absl::Status Check(const Json& s, const std::string& where, int depth);

absl::Status CheckChildren(const Json& s, const std::string& where, int depth) {
  for (const char* key : kSubschema) {
    auto it = s.find(key);
    if (it != s.end() && it->is_object()) {
      if (absl::Status st = Check(*it, absl::StrCat(where, "/", key), depth + 1); !st.ok()) {
        return st;
      }
    }
  }
  for (const char* key : kSubschemaMaps) {
    auto it = s.find(key);
    if (it == s.end() || !it->is_object()) continue;
    for (const auto& [name, sub] : it->items()) {
      if (absl::Status st = Check(sub, absl::StrCat(where, "/", key, "/", name), depth + 1);
          !st.ok()) {
        return st;
      }
    }
  }
  for (const char* key : kSubschemaLists) {
    auto it = s.find(key);
    if (it == s.end() || !it->is_array()) continue;
    for (size_t i = 0; i < it->size(); ++i) {
      if (absl::Status st = Check((*it)[i], absl::StrCat(where, "/", key, "/", i), depth + 1);
          !st.ok()) {
        return st;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Check(const Json& s, const std::string& where, int depth) {
  if (!s.is_object()) return absl::OkStatus();  // true/false schemas, or the compiler's error
  if (depth > kMaxDepth) return Refuse(where, "nested too deep");
  for (const char* key : kUnenforced) {
    if (s.contains(key)) return Refuse(where, absl::StrCat("'", key, "' is not supported"));
  }
  if (auto it = s.find("uniqueItems"); it != s.end() && *it == true) {
    return Refuse(where, "'uniqueItems' is not supported");
  }
  if (auto it = s.find("allOf"); it != s.end() && it->is_array() && it->size() > 1) {
    return Refuse(where, "'allOf' with more than one schema is not supported");
  }
  if (auto it = s.find("$ref");
      it != s.end() && it->is_string() && !it->get<std::string>().starts_with("#")) {
    return Refuse(where, absl::StrCat("'$ref' to \"", it->get<std::string>(),
                                      "\": only references into this schema (\"#...\") are "
                                      "supported"));
  }
  if (!s.contains("type") && !s.contains("$ref")) {
    for (const char* key : kNeedType) {
      if (s.contains(key)) {
        return Refuse(where, absl::StrCat("'", key, "' needs a 'type' beside it"));
      }
    }
  }
  return CheckChildren(s, where, depth);
}

// Every {"type": "json_schema", "json_schema": ...} in a structural tag.
absl::Status CheckTagFormats(const Json& j, int depth) {
  if (depth > kMaxDepth) return absl::OkStatus();  // the compiler refuses it
  if (j.is_object()) {
    auto type = j.find("type");
    auto schema = j.find("json_schema");
    if (type != j.end() && *type == "json_schema" && schema != j.end()) {
      return Check(*schema, "", 0);
    }
    for (const auto& [key, value] : j.items()) {
      if (absl::Status s = CheckTagFormats(value, depth + 1); !s.ok()) return s;
    }
  } else if (j.is_array()) {
    for (const Json& value : j) {
      if (absl::Status s = CheckTagFormats(value, depth + 1); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

Json ParseOrDiscarded(std::string_view text) {
  return Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

}  // namespace

absl::Status CheckJsonSchemaEnforced(std::string_view schema) {
  const Json j = ParseOrDiscarded(schema);
  if (j.is_discarded()) return absl::OkStatus();
  return Check(j, "", 0);
}

absl::Status CheckStructuralTagSchemas(std::string_view structural_tag) {
  const Json j = ParseOrDiscarded(structural_tag);
  if (j.is_discarded()) return absl::OkStatus();
  return CheckTagFormats(j, 0);
}

}  // namespace pdserve
