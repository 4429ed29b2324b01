// LocalGeneration: the router's request path as an in-process API, for a
// front inside the router process (the OpenAI HTTP API). A request opened
// here goes through what a gRPC Generate goes through — authentication,
// per-client limits, admission, validation, placement, retries, failover,
// deadlines, metrics — without a loopback channel that would serialise
// every request and token twice (as Triton's HTTP front calls its core).
//
// Thread-safety: every method from any thread.
#ifndef PDSERVE_ROUTER_API_LOCAL_GENERATION_H_
#define PDSERVE_ROUTER_API_LOCAL_GENERATION_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "pdserve/v1/generation.pb.h"
#include "router/call/generate_client.h"
#include "router/call/router_metrics.h"

namespace pdserve::router {

// Who is calling, as a door sees it.
struct Caller {
  Api api = Api::kGrpc;
  // The client's address without its port: a client without a bearer
  // token is its host, whatever port it comes from.
  std::string host;
  // The Authorization header ("Bearer <token>"), if the client sent one.
  std::optional<std::string> authorization;
};

class LocalGeneration {
 public:
  // One admitted request. Dropping it tells the router the front will not
  // call in again; do that once its client's Finish ran (or never started).
  class Call {
   public:
    virtual ~Call() = default;
    // Validates and places `request` (once); the answer goes to the client.
    virtual void Start(const v1::GenerateRequest& request) = 0;
    // The client went away: cancels the request on every tier.
    virtual void Cancel() = 0;
    // A write the client's Write() left pending (returned false) is done:
    // `ok` false when it failed (the client is gone). Until then the
    // router writes nothing more, buffers at most a few messages and stops
    // reading from the decode worker (back pressure).
    virtual void WriteDone(bool ok) = 0;
  };

  virtual ~LocalGeneration() = default;

  // Admits a request of `caller` that will answer `client` (valid until its
  // Finish), or the refusal (UNAUTHENTICATED, RESOURCE_EXHAUSTED), logged
  // and counted.
  virtual absl::StatusOr<std::shared_ptr<Call>> Open(const Caller& caller,
                                                     GenerateClient* client) = 0;
  // The served model, for an authenticated caller.
  virtual absl::StatusOr<v1::ModelInfo> ModelInfo(const Caller& caller) = 0;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_API_LOCAL_GENERATION_H_
