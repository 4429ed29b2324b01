// OpenAiFront: the router's OpenAI-compatible HTTP API (HTTP/1.1 on
// Boost.Beast, common/http), served beside the gRPC API:
//
//   POST /v1/chat/completions   chat, streamed (SSE) or not
//   POST /v1/completions        text or token-id prompts, streamed or not
//   GET  /v1/models[/<id>]      the served model
//   GET  /health                liveness: the process answers
//   GET  /ready                 a usable decode worker (prefill remote or
//                               local) is live; else 503
//
// Every model call goes through the router's own request path by its
// in-process door (LocalGeneration, OpenAiCall), so the two APIs share
// authentication, limits, validation, the request state machine and
// metrics. The front tells the router who its client is (its address, for
// per-client limits without tokens; its Authorization header) and that
// the request came over HTTP (the `api` metric label).
//
// HttpServer bounds what a client can hold (read timeout, header and body
// caps); errors it answers itself get OpenAI's JSON shape too.
//
// Thread-safety: Start() and the destructor from one thread; handlers run
// on the HTTP I/O thread and never block.
#ifndef PDSERVE_ROUTER_API_OPENAI_OPENAI_FRONT_H_
#define PDSERVE_ROUTER_API_OPENAI_OPENAI_FRONT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/http/http_request.h"
#include "common/http/http_responder.h"
#include "common/http/http_server.h"
#include "common/text/tokenizer.h"
#include "grpcpp/support/status.h"
#include "router/api/local_generation.h"
#include "router/api/openai/openai_call.h"
#include "router/api/openai/openai_error.h"
#include "router/api/openai/openai_request.h"

namespace pdserve::router::openai {

struct OpenAiFrontOptions {
  HttpServerOptions http;
  // The name /v1/models reports; a request's `model` must be it (or
  // omitted).
  std::string model_name;
  // Whether the router can serve a request now (/ready).
  std::function<bool()> ready;
  // A chat or completions request the front refused itself, before it
  // reached the router (malformed JSON, a wrong field, an unknown model), as the
  // gRPC code it stands for, so the request metrics count every request
  // (optional).
  std::function<void(grpc::StatusCode)> count_refused;
};

class OpenAiFront {
 public:
  // `router` (the request path) and `tokenizer` (log-probabilities' token
  // text) must outlive the front.
  static absl::StatusOr<std::unique_ptr<OpenAiFront>> Start(OpenAiFrontOptions options,
                                                            LocalGeneration& router,
                                                            const Tokenizer& tokenizer);
  // Stops accepting and closes every connection, which cancels the calls
  // in flight.
  ~OpenAiFront();

  int port() const { return server_->port(); }

 private:
  OpenAiFront(OpenAiFrontOptions options, LocalGeneration& router, const Tokenizer& tokenizer);

  void Handle(HttpRequest request, std::shared_ptr<HttpResponder> responder);
  void Generate(Endpoint endpoint, const HttpRequest& request,
                std::shared_ptr<HttpResponder> responder);
  // Answers `e` and counts it as a refused request of code `code`.
  void Refuse(grpc::StatusCode code, const OpenAiError& e, const HttpRequest& request,
              HttpResponder& responder) const;
  void Models(const HttpRequest& request, absl::string_view id,
              std::shared_ptr<HttpResponder> responder);
  // Who is calling, as the router sees callers.
  static Caller CallerOf(const HttpRequest& request);

  // Counts a call into the router; the returned function ends it. The
  // destructor waits until every call ended: their callbacks use this.
  std::function<void()> CallStarted();

  const OpenAiFrontOptions options_;
  LocalGeneration& router_;
  const Tokenizer& tokenizer_;
  absl::Mutex mu_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<HttpServer> server_;  // last: stopped first
};

}  // namespace pdserve::router::openai

#endif  // PDSERVE_ROUTER_API_OPENAI_OPENAI_FRONT_H_
