// OpenAiResponse: turns the router's Generate stream (Started, Chunk...,
// Finished) into OpenAI's response documents for one request — the
// server-sent-event chunks of a streamed answer ("chat.completion.chunk" /
// "text_completion" objects, a usage chunk when asked, then [DONE]) or the
// single "chat.completion" / "text_completion" object of an unstreamed one.
//
// Beyond OpenAI's fields every final document carries the request's
// per-phase `timings` and its `placement` (the gRPC API's Finished fields,
// in the proto's JSON form), as llama-server adds its own `timings`.
//
// With tools, the model's tool calls are returned as OpenAI's `tool_calls`
// (whole in one delta each when streamed) and not as content.
//
// Log-probabilities come with each chunk's tokens (v1::Chunk.logprobs);
// a token's text is its bytes as the model's vocabulary holds them, shown
// as UTF-8 (a token that is part of a character shows U+FFFD there; its
// `bytes` are exact).
//
// One per request; not thread-safe (the call that owns it serialises).
#ifndef PDSERVE_ROUTER_API_OPENAI_OPENAI_RESPONSE_H_
#define PDSERVE_ROUTER_API_OPENAI_OPENAI_RESPONSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/text/tokenizer.h"
#include "nlohmann/json.hpp"
#include "pdserve/v1/generation.pb.h"
#include "router/api/openai/openai_request.h"
#include "router/api/openai/tool_call_parser.h"

namespace pdserve::router::openai {

class OpenAiResponse {
 public:
  struct Options {
    Endpoint endpoint = Endpoint::kChatCompletions;
    std::string model;      // the served model's name
    int64_t created = 0;    // Unix seconds
    int32_t logprobs = -1;  // as OpenAiRequest
    bool include_usage = false;
    // Chat with tools (not tool_choice "none"): the offered tools' names.
    // Tool calls in the answer become `tool_calls` (tool_call_parser.h)
    // and a choice that made any ends with "tool_calls".
    std::vector<std::string> tools;
  };
  // `tokenizer` must outlive this object.
  OpenAiResponse(const Tokenizer& tokenizer, Options options);

  // The stream began: names the response after the request's id.
  void Start(const v1::Started& started);

  // Streamed: the SSE events ("data: ...\n\n") for each part of the stream.
  std::string StreamStart();  // chat: the assistant role; completions: nothing
  std::string StreamChunk(const v1::Chunk& chunk);
  std::string StreamEnd(const v1::Finished& finished);  // finish reason, usage, [DONE]

  // Unstreamed: collect chunks, then the whole document.
  void Append(const v1::Chunk& chunk);
  std::string Whole(const v1::Finished& finished) const;

 private:
  nlohmann::json Envelope(const char* object) const;
  nlohmann::json Choice(nlohmann::json content, const nlohmann::json& logprobs,
                        const nlohmann::json& finish_reason) const;
  // The chunk's log-probabilities in the endpoint's shape; null when none
  // were asked. Advances text_offset_ (completions' text_offset).
  nlohmann::json Logprobs(const v1::Chunk& chunk);
  nlohmann::json ChatTokenLogprob(int32_t token, float logprob) const;
  nlohmann::json Usage(const v1::Finished& finished) const;
  void AddExtensions(const v1::Finished& finished, nlohmann::json* doc) const;
  // A streamed chunk's delta from what the tool-call parser released;
  // `first_index` is the index of its first call.
  static nlohmann::json ToolDelta(const ToolCallParser::Output& released, int first_index);
  const char* FinishReason(const v1::Finished& finished, int calls) const;
  static std::string Event(const nlohmann::json& doc);

  const Tokenizer& tokenizer_;
  const Options options_;
  std::string id_;
  // Unstreamed: the text and log-probabilities so far.
  std::string text_;
  nlohmann::json logprobs_;
  int64_t text_offset_ = 0;
  std::optional<ToolCallParser> tools_;  // Options::tool_calls, streamed
};

// "stop" or "length", as OpenAI names why a choice ended (without tools).
const char* FinishReasonName(v1::FinishReason reason);

}  // namespace pdserve::router::openai

#endif  // PDSERVE_ROUTER_API_OPENAI_OPENAI_RESPONSE_H_
