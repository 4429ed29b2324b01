// Structured output in an OpenAI request: which constraint (if any) the
// answer must follow, onto GenerateRequest's sampling.constraint. Read from
// OpenAI's `response_format` (`text`, `json_object`, `json_schema` with its
// `schema` and `strict`) and from the fields the peers' users already send:
// vLLM's `guided_json`, `guided_regex`, `guided_grammar`, `guided_choice`
// and llama-server's `json_schema` and `grammar` (GBNF). At most one may be
// given. Objects keep the client's key order (a schema's properties are
// written in that order). Whether the schema, regex or grammar compiles is
// the router's check at admission (RequestValidator), for both APIs alike.
#ifndef PDSERVE_ROUTER_API_OPENAI_OPENAI_CONSTRAINT_H_
#define PDSERVE_ROUTER_API_OPENAI_OPENAI_CONSTRAINT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "pdserve/v1/common.pb.h"

namespace pdserve::router::openai {

// Sets `sampling`'s constraint from the request body `j`, or INVALID_ARGUMENT
// (OpenAI's invalid_request_error with the parameter) for a malformed one.
absl::Status ParseConstraint(const nlohmann::ordered_json& j, v1::SamplingParams* sampling);

// A regex matching exactly one of `choices`, each taken literally.
std::string ChoiceRegex(const std::vector<std::string>& choices);

}  // namespace pdserve::router::openai

#endif  // PDSERVE_ROUTER_API_OPENAI_OPENAI_CONSTRAINT_H_
