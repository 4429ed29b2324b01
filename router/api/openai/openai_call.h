// OpenAiCall: one chat or completions request over HTTP, carried out by the
// router's own request path through its in-process door (LocalGeneration):
// the HTTP front is a second door into the same path, not a second path.
// So authentication, per-client limits, admission, validation, placement,
// retries, failover, deadlines and metrics are the gRPC API's, done once.
// The call turns the request's messages into the HTTP answer
// (OpenAiResponse) and ties the two ends' lifetimes together: a client
// that disconnects cancels the request on both tiers, which frees its KV
// blocks.
//
// A stream's HTTP head is sent when the router reports Started, after
// validation and placement, so every refusal before that is a plain HTTP
// error with OpenAI's body; a failure after it ends the event stream with
// an error event (as vLLM does), since the status line is already sent.
//
// Lifetime: owns itself from Start() until the router's Finish. Threading:
// the router writes one message at a time and finishes once; the client's
// close may come from the HTTP thread at any time.
#ifndef PDSERVE_ROUTER_API_OPENAI_OPENAI_CALL_H_
#define PDSERVE_ROUTER_API_OPENAI_OPENAI_CALL_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/http/http_responder.h"
#include "pdserve/v1/generation.pb.h"
#include "router/api/local_generation.h"
#include "router/api/openai/openai_request.h"
#include "router/api/openai/openai_response.h"

namespace pdserve::router::openai {

class OpenAiCall final : public GenerateClient {
 public:
  // Starts the request; the answer goes to `responder`. `router` must
  // outlive the start, `response`'s tokenizer the call; `on_destroyed`
  // runs when the call is gone (its owner waits for that before it goes).
  static void Start(LocalGeneration& router, const Caller& caller, OpenAiRequest request,
                    OpenAiResponse response, std::shared_ptr<HttpResponder> responder,
                    std::function<void()> on_destroyed);
  ~OpenAiCall() override;

  // GenerateClient: a streamed chunk's write completes when the socket has
  // taken it (back pressure); every other message is taken at once.
  bool Write(const v1::GenerateResponse& message) override;
  void Finish(const grpc::Status& status) override;

 private:
  OpenAiCall(OpenAiRequest request, OpenAiResponse response,
             std::shared_ptr<HttpResponder> responder, std::function<void()> on_destroyed);
  void OnStarted(const v1::Started& started);
  void Fail(const grpc::Status& status);
  // The HTTP client went away.
  void Cancel();
  // Streams `chunk`; false while its write is pending.
  bool WriteChunk(const v1::Chunk& chunk);
  // The pending chunk is in the socket (or never will be): tells the router.
  void ChunkWritten(bool ok);

  const std::function<void()> on_destroyed_;
  const OpenAiRequest request_;
  OpenAiResponse response_;
  const std::shared_ptr<HttpResponder> responder_;
  std::optional<v1::Finished> finished_;
  bool streaming_ = false;  // the event stream's head is sent
  std::string request_id_;

  absl::Mutex mu_;
  // The router's request, until its Finish reached us. Shared so that a
  // cancel racing the finish holds it while it calls in.
  std::shared_ptr<LocalGeneration::Call> call_ ABSL_GUARDED_BY(mu_);
  // Keeps the object alive until Finish; the client's on-close holds only
  // a weak reference.
  std::shared_ptr<OpenAiCall> self_;
  std::weak_ptr<OpenAiCall> weak_self_;  // for the socket's write callbacks
  // A streamed chunk's write is pending with the router (set by the
  // router's thread, cleared once by the socket's or the close's).
  std::atomic<bool> chunk_pending_{false};
};

}  // namespace pdserve::router::openai

#endif  // PDSERVE_ROUTER_API_OPENAI_OPENAI_CALL_H_
