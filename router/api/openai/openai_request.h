// OpenAiRequest: a POST /v1/chat/completions or /v1/completions body,
// parsed into the GenerateRequest the router's own gRPC Generate takes plus
// what only the HTTP answer needs (streaming, usage chunk, log-probability
// shape). The parser checks what is OpenAI's to check — JSON syntax and
// UTF-8, nesting depth, field types, `n`, the log-probability counts,
// features pdserve does not serve (legacy functions, logit bias, echo,
// batches of prompts) — and leaves every range and limit the gRPC API
// also has (temperature, top_p, penalties, max_tokens against the context,
// stop strings, token ids) to the router's RequestValidator, so the two
// doors share one validator.
//
// Unknown fields are ignored, as OpenAI's SDKs send fields this server has
// no use for; a known field of the wrong type is an error naming it. OpenAI's
// defaults apply where they differ from the gRPC API's: temperature 1, a
// random seed, completions' max_tokens 16 and chat's "until the context is
// full".
//
// Pure functions; thread-safe.
#ifndef PDSERVE_ROUTER_API_OPENAI_OPENAI_REQUEST_H_
#define PDSERVE_ROUTER_API_OPENAI_OPENAI_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pdserve/v1/generation.pb.h"

namespace pdserve::router::openai {

enum class Endpoint { kChatCompletions, kCompletions };

// The most alternatives a request may ask log-probabilities for (OpenAI's
// top_logprobs limit).
inline constexpr int kMaxTopLogprobs = 20;
// JSON nesting beyond this is refused before it is built.
inline constexpr int kMaxJsonDepth = 32;

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::kChatCompletions;
  v1::GenerateRequest generate;
  std::string model;  // as sent; "" when omitted
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Log-probabilities to return: -1 none, else the number of top
  // alternatives per token (0 = the chosen token's only).
  int32_t logprobs = -1;
  // Chat with tools (tool_choice not "none"): their names. The answer's
  // tool calls are returned as `tool_calls`.
  std::vector<std::string> tools;
};

// Errors are INVALID_ARGUMENT; the field at fault rides along as the
// payload openai_error.h reads (FromParseStatus).
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(Endpoint endpoint, absl::string_view body);

}  // namespace pdserve::router::openai

#endif  // PDSERVE_ROUTER_API_OPENAI_OPENAI_REQUEST_H_
