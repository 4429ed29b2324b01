#include "router/api/openai/openai_error.h"

#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pdserve::router::openai {
namespace {

constexpr absl::string_view kParamPayload = "type.pdserve.dev/openai-param";

nlohmann::json NullOr(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

OpenAiError Make(int http_status, std::string type, std::string message, std::string code = "",
                 int retry_after_s = 0) {
  OpenAiError e;
  e.http_status = http_status;
  e.type = std::move(type);
  e.message = std::move(message);
  e.code = std::move(code);
  e.retry_after_s = retry_after_s;
  return e;
}

}  // namespace

std::string JsonText(const nlohmann::json& doc) {
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string OpenAiError::Body() const {
  nlohmann::json error = {
      {"message", message}, {"type", type}, {"param", NullOr(param)}, {"code", NullOr(code)}};
  return JsonText(nlohmann::json{{"error", std::move(error)}});
}

void RespondError(HttpResponder& responder, const OpenAiError& e) {
  HttpHeaderList headers;
  if (e.retry_after_s > 0) headers.emplace_back("Retry-After", absl::StrCat(e.retry_after_s));
  responder.Respond(e.http_status, "application/json", e.Body(), std::move(headers));
}

OpenAiError InvalidRequest(std::string message, std::string param, std::string code) {
  OpenAiError e = Make(400, "invalid_request_error", std::move(message), std::move(code));
  e.param = std::move(param);
  return e;
}

OpenAiError NotFound(std::string message, std::string code) {
  return Make(404, "invalid_request_error", std::move(message), std::move(code));
}

OpenAiError FromGrpcStatus(const grpc::Status& status) {
  std::string message = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      return InvalidRequest(std::move(message));
    case grpc::StatusCode::OUT_OF_RANGE: {
      // The validator's limits: a prompt beyond the context or the server's
      // caps. OpenAI names the context case so clients can shorten input.
      const bool context = absl::StrContains(message, "context length");
      return InvalidRequest(std::move(message), "", context ? "context_length_exceeded" : "");
    }
    case grpc::StatusCode::UNAUTHENTICATED:
      return Make(401, "authentication_error", std::move(message), "invalid_api_key");
    case grpc::StatusCode::PERMISSION_DENIED:
      return Make(403, "permission_error", std::move(message));
    case grpc::StatusCode::NOT_FOUND:
      return Make(404, "invalid_request_error", std::move(message));
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return Make(429, "rate_limit_error", std::move(message), "rate_limit_exceeded", 1);
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::ABORTED:
      // No usable worker pairing right now (none live, or only incompatible
      // versions mid-rollout): worth retrying shortly.
      return Make(503, "service_unavailable", std::move(message), "", 1);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Make(504, "timeout", std::move(message));
    case grpc::StatusCode::CANCELLED:
      // The client is gone; nobody reads this, but the log line says why.
      return Make(499, "cancelled", std::move(message));
    case grpc::StatusCode::UNIMPLEMENTED:
      return Make(501, "not_implemented", std::move(message));
    default:
      return Make(500, "server_error", std::move(message));
  }
}

OpenAiError FromHttpStatus(int http_status) {
  switch (http_status) {
    case 413:
      return Make(413, "invalid_request_error", "request body too large");
    case 431:
      return Make(431, "invalid_request_error", "request header fields too large");
    case 400:
      return InvalidRequest("malformed HTTP request");
    default:
      return Make(http_status, http_status >= 500 ? "server_error" : "invalid_request_error",
                  absl::StrCat("HTTP ", http_status));
  }
}

absl::Status InvalidParam(absl::string_view param, absl::string_view message) {
  absl::Status s = absl::InvalidArgumentError(message);
  s.SetPayload(kParamPayload, absl::Cord(param));
  return s;
}

OpenAiError FromParseStatus(const absl::Status& status) {
  std::string param;
  if (auto p = status.GetPayload(kParamPayload); p.has_value()) {
    param = std::string(*p);
  }
  return InvalidRequest(std::string(status.message()), std::move(param));
}

}  // namespace pdserve::router::openai
