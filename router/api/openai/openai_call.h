// OpenAiCall: one chat or completions request over HTTP, carried out as a
// call of the router's own gRPC Generate on an in-process channel — the
// HTTP front is a second door into the same request path, not a second
// path. So authentication, per-client limits, admission, validation,
// placement, retries, failover, deadlines and metrics are the gRPC API's,
// done once. The call turns the Generate stream into the HTTP answer
// (OpenAiResponse) and ties the two ends' lifetimes together: a client
// that disconnects cancels the gRPC call, which cancels the request on
// both tiers and frees its KV blocks.
//
// A stream's HTTP head is sent when the router reports Started, after
// validation and placement, so every refusal before that is a plain HTTP
// error with OpenAI's body; a failure after it ends the event stream with
// an error event (as vLLM does), since the status line is already sent.
//
// Lifetime: owns itself from Start() until gRPC's OnDone. Threading: gRPC
// runs one reaction at a time (a read is outstanding at most once, and
// OnDone comes last); the responder may be called from any thread.
#ifndef PDSERVE_ROUTER_API_OPENAI_OPENAI_CALL_H_
#define PDSERVE_ROUTER_API_OPENAI_OPENAI_CALL_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/http/http_responder.h"
#include "grpcpp/grpcpp.h"
#include "pdserve/v1/generation.grpc.pb.h"
#include "router/api/openai/openai_request.h"
#include "router/api/openai/openai_response.h"

namespace pdserve::router::openai {

class OpenAiCall final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  // Metadata the gRPC call carries: the client's authorization header and
  // what the front tells the router about its client.
  using Metadata = std::vector<std::pair<std::string, std::string>>;

  // Starts the call; the answer goes to `responder`. `stub` must outlive
  // the start, `response`'s tokenizer the call; `on_destroyed` runs when
  // the call is gone (its owner waits for that before it goes).
  static void Start(v1::Generation::Stub* stub, OpenAiRequest request, OpenAiResponse response,
                    const Metadata& metadata, std::shared_ptr<HttpResponder> responder,
                    std::function<void()> on_destroyed);
  ~OpenAiCall() override;

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  OpenAiCall(OpenAiRequest request, OpenAiResponse response,
             std::shared_ptr<HttpResponder> responder, std::function<void()> on_destroyed);
  void OnStarted(const v1::Started& started);
  void Fail(const grpc::Status& status);

  const std::function<void()> on_destroyed_;
  const OpenAiRequest request_;
  OpenAiResponse response_;
  const std::shared_ptr<HttpResponder> responder_;
  grpc::ClientContext context_;
  v1::GenerateResponse message_;
  std::optional<v1::Finished> finished_;
  bool streaming_ = false;  // the event stream's head is sent
  std::string request_id_;
  // Keeps the call alive until OnDone; the client's on-close holds only a
  // weak reference.
  std::shared_ptr<OpenAiCall> self_;
};

}  // namespace pdserve::router::openai

#endif  // PDSERVE_ROUTER_API_OPENAI_OPENAI_CALL_H_
