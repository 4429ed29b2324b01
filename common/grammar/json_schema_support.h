// Which JSON Schemas pdserve accepts as constraints: those whose every rule
// XGrammar's grammar enforces, so that a constrained answer validates. A
// schema using a rule XGrammar 0.2.9 would silently leave out is refused
// (INVALID_ARGUMENT naming the keyword and where it is), as vLLM refuses
// them for XGrammar, rather than answered with documents that break it:
//  - keywords it does not enforce: multipleOf, uniqueItems (true), not,
//    if/then/else, dependencies (and dependentRequired/-Schemas), contains
//    (and min/maxContains), propertyNames, patternProperties,
//    min/maxProperties, unevaluatedItems/-Properties;
//  - allOf with more than one schema (only partly merged);
//  - $ref to anything but this document ("#...");
//  - a number, string or array rule (minimum, maximum, exclusive*,
//    minLength, maxLength, pattern, format, minItems, maxItems) in a schema
//    without "type": XGrammar enforces them only on a typed schema.
// oneOf is accepted and documented: branches XGrammar cannot prove disjoint
// are read as anyOf (a document may match more than one).
//
// The JSON-Schema-Test-Suite run (json_schema_suite_test) holds this list
// to account. Thread-safe; pure functions.
#ifndef PDSERVE_COMMON_GRAMMAR_JSON_SCHEMA_SUPPORT_H_
#define PDSERVE_COMMON_GRAMMAR_JSON_SCHEMA_SUPPORT_H_

#include <string_view>

#include "absl/status/status.h"

namespace pdserve {

// OK, or INVALID_ARGUMENT saying what XGrammar would not enforce. Text that
// is not JSON is left to the compiler's own error.
absl::Status CheckJsonSchemaEnforced(std::string_view schema);

// The same for every json_schema format inside XGrammar structural-tag JSON.
absl::Status CheckStructuralTagSchemas(std::string_view structural_tag);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_GRAMMAR_JSON_SCHEMA_SUPPORT_H_
