#include "router/api/openai/openai_front.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "router/api/openai/openai_error.h"
#include "router/api/openai/openai_response.h"

namespace pdserve::router::openai {
namespace {

using Json = nlohmann::json;

void RespondJson(HttpResponder& responder, int status, const Json& doc) {
  responder.Respond(status, "application/json", JsonText(doc));
}

// Logs a refusal, then answers it.
void LogAndRespond(HttpResponder& responder, const OpenAiError& e, const HttpRequest& request) {
  LOG(WARNING) << request.method << " " << request.Path() << " from " << request.peer << ": "
               << e.http_status << " " << e.message;
  RespondError(responder, e);
}

}  // namespace

absl::StatusOr<std::unique_ptr<OpenAiFront>> OpenAiFront::Start(OpenAiFrontOptions options,
                                                                LocalGeneration& router,
                                                                const Tokenizer& tokenizer) {
  std::unique_ptr<OpenAiFront> front(new OpenAiFront(std::move(options), router, tokenizer));
  HttpServerOptions http = front->options_.http;
  http.error_body = [](int status) {
    return std::make_pair(std::string("application/json"), FromHttpStatus(status).Body());
  };
  OpenAiFront* raw = front.get();
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(http, [raw](HttpRequest request, std::shared_ptr<HttpResponder> responder) {
        raw->Handle(std::move(request), std::move(responder));
      });
  if (!server.ok()) {
    return absl::Status(server.status().code(),
                        absl::StrCat("--http_listen: ", server.status().message()));
  }
  front->server_ = std::move(*server);
  LOG(INFO) << "OpenAI-compatible HTTP API on port " << front->port() << " (model \""
            << front->options_.model_name << "\")";
  return front;
}

OpenAiFront::OpenAiFront(OpenAiFrontOptions options, LocalGeneration& router,
                         const Tokenizer& tokenizer)
    : options_(std::move(options)), router_(router), tokenizer_(tokenizer) {}

OpenAiFront::~OpenAiFront() {
  // Closing the connections cancels every call; each is gone once the
  // router finished it.
  server_.reset();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &calls_));
}

std::function<void()> OpenAiFront::CallStarted() {
  absl::MutexLock lock(&mu_);
  ++calls_;
  return [this] {
    absl::MutexLock lock(&mu_);
    --calls_;
  };
}

void OpenAiFront::Handle(HttpRequest request, std::shared_ptr<HttpResponder> responder) {
  const absl::string_view path = request.Path();
  const bool get = request.method == "GET" || request.method == "HEAD";
  const bool post = request.method == "POST";
  auto wrong_method = [&] {
    OpenAiError e = InvalidRequest(
        absl::StrCat("method ", request.method, " is not allowed on ", path), "", "");
    e.http_status = 405;
    LogAndRespond(*responder, e, request);
  };
  if (path == "/v1/chat/completions" || path == "/v1/completions") {
    if (!post) return wrong_method();
    return Generate(path == "/v1/completions" ? Endpoint::kCompletions : Endpoint::kChatCompletions,
                    request, std::move(responder));
  }
  if (absl::string_view id = path;
      path == "/v1/models" || absl::ConsumePrefix(&id, "/v1/models/")) {
    if (!get) return wrong_method();
    return Models(request, path == "/v1/models" ? absl::string_view() : id, std::move(responder));
  }
  if (path == "/health") {
    if (!get) return wrong_method();
    return RespondJson(*responder, 200, Json{{"status", "ok"}});
  }
  if (path == "/ready") {
    if (!get) return wrong_method();
    if (options_.ready && options_.ready()) {
      return RespondJson(*responder, 200, Json{{"status", "ready"}});
    }
    OpenAiError e = FromGrpcStatus(grpc::Status(
        grpc::StatusCode::UNAVAILABLE, "no usable decode worker is live (see the router's log)"));
    return LogAndRespond(*responder, e, request);
  }
  LogAndRespond(*responder, NotFound(absl::StrCat("no route for ", path), "not_found"), request);
}

Caller OpenAiFront::CallerOf(const HttpRequest& request) {
  // The host alone: a client is its address, whatever port it comes from.
  const size_t colon = request.peer.rfind(':');
  Caller caller{.api = Api::kOpenAi,
                .host = colon == std::string::npos ? request.peer : request.peer.substr(0, colon),
                .authorization = {}};
  if (std::optional<absl::string_view> auth = request.Header("authorization"); auth.has_value()) {
    caller.authorization = std::string(*auth);
  }
  return caller;
}

void OpenAiFront::Refuse(grpc::StatusCode code, const OpenAiError& e, const HttpRequest& request,
                         HttpResponder& responder) const {
  if (options_.count_refused) options_.count_refused(code);
  LogAndRespond(responder, e, request);
}

void OpenAiFront::Generate(Endpoint endpoint, const HttpRequest& request,
                           std::shared_ptr<HttpResponder> responder) {
  absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(endpoint, request.body);
  if (!parsed.ok()) {
    return Refuse(grpc::StatusCode::INVALID_ARGUMENT, FromParseStatus(parsed.status()), request,
                  *responder);
  }
  if (!parsed->model.empty() && parsed->model != options_.model_name) {
    return Refuse(
        grpc::StatusCode::NOT_FOUND,
        NotFound(absl::StrCat("The model `", parsed->model,
                              "` does not exist; this server serves `", options_.model_name, "`"),
                 "model_not_found"),
        request, *responder);
  }
  v1::SamplingParams* sampling = parsed->generate.mutable_sampling();
  // Without a seed OpenAI's answers vary from call to call; the gRPC API's
  // default (seed 0) would make every such request sample alike.
  if (!sampling->has_seed()) {
    thread_local absl::BitGen gen;
    sampling->set_seed(absl::Uniform<uint64_t>(gen));
  }
  if (std::optional<absl::string_view> id = request.Header("x-request-id"); id.has_value()) {
    parsed->generate.set_request_id(std::string(*id));
  }
  OpenAiResponse response(tokenizer_, {.endpoint = endpoint,
                                       .model = options_.model_name,
                                       .created = absl::ToUnixSeconds(absl::Now()),
                                       .logprobs = parsed->logprobs,
                                       .include_usage = parsed->include_usage,
                                       .tools = parsed->tools});
  OpenAiCall::Start(router_, CallerOf(request), *std::move(parsed), std::move(response),
                    std::move(responder), CallStarted());
}

void OpenAiFront::Models(const HttpRequest& request, absl::string_view id,
                         std::shared_ptr<HttpResponder> responder) {
  if (!id.empty() && id != options_.model_name) {
    return LogAndRespond(
        *responder,
        NotFound(absl::StrCat("The model `", id, "` does not exist"), "model_not_found"), request);
  }
  // Asked of the router so the answer is authenticated as a request is.
  absl::StatusOr<v1::ModelInfo> info = router_.ModelInfo(CallerOf(request));
  if (!info.ok()) {
    return LogAndRespond(*responder, FromGrpcStatus(ToGrpcStatus(info.status())), request);
  }
  Json model = {{"id", options_.model_name},
                {"object", "model"},
                {"created", 0},
                {"owned_by", "pdserve"},
                {"max_model_len", info->context_length()}};
  if (!id.empty()) return RespondJson(*responder, 200, model);
  RespondJson(*responder, 200, Json{{"object", "list"}, {"data", Json::array({model})}});
}

}  // namespace pdserve::router::openai
