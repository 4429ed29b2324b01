// OpenAiError: an error as OpenAI-compatible clients expect it — an HTTP
// status plus the JSON body {"error": {"message", "type", "param", "code"}}.
// The SDKs raise their exception classes (BadRequestError, RateLimitError,
// ...) from the status and show the message, so both must say what went
// wrong. Errors of the request path arrive as gRPC statuses (the HTTP front
// is a client of the router's own Generate), and FromGrpcStatus maps them
// the way vLLM and OpenAI do: bad input 400, bad key 401, unknown model or
// path 404, over capacity 429 (with Retry-After), no worker 503, deadline
// 504, bugs 500.
//
// A value type.
#ifndef PDSERVE_ROUTER_API_OPENAI_OPENAI_ERROR_H_
#define PDSERVE_ROUTER_API_OPENAI_OPENAI_ERROR_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/http/http_responder.h"
#include "grpcpp/support/status.h"
#include "nlohmann/json.hpp"

namespace pdserve::router::openai {

struct OpenAiError {
  int http_status = 500;
  std::string type;     // "invalid_request_error", "authentication_error", ...
  std::string message;  // for people
  std::string param;    // the request field at fault; "" = null
  std::string code;     // machine-readable detail; "" = null
  // Seconds a client should wait before retrying (429, 503); 0 = no header.
  int retry_after_s = 0;

  // The {"error": {...}} document.
  std::string Body() const;
};

// `doc` as compact JSON text. Invalid UTF-8 (a client's bytes quoted in a
// message, a token that is part of a character) becomes U+FFFD rather
// than failing the whole document.
std::string JsonText(const nlohmann::json& doc);

// Answers `e` on `responder`: its status, its body, and Retry-After when it
// has one.
void RespondError(HttpResponder& responder, const OpenAiError& e);

// A request the front refuses itself (malformed JSON, a field of the wrong
// type or out of OpenAI's range): 400 naming `param`.
OpenAiError InvalidRequest(std::string message, std::string param = "", std::string code = "");
OpenAiError NotFound(std::string message, std::string code);
// The error of a failed call on the router's gRPC API.
OpenAiError FromGrpcStatus(const grpc::Status& status);
// The error HttpServer answers for a request it could not read (400, 413,
// 431, ...).
OpenAiError FromHttpStatus(int http_status);

// Parsing errors carry the field at fault as a payload of the status, so one
// StatusOr can say both what and where.
absl::Status InvalidParam(absl::string_view param, absl::string_view message);
// The 400 for a status made by InvalidParam (or any INVALID_ARGUMENT).
OpenAiError FromParseStatus(const absl::Status& status);

}  // namespace pdserve::router::openai

#endif  // PDSERVE_ROUTER_API_OPENAI_OPENAI_ERROR_H_
