#include "router/api/openai/openai_request.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "nlohmann/json.hpp"
#include "router/api/openai/openai_constraint.h"
#include "router/api/openai/openai_error.h"
#include "router/api/openai/openai_json.h"
#include "router/api/openai/openai_tools.h"

namespace pdserve::router::openai {
namespace {

using Json = nlohmann::ordered_json;

// OpenAI's default for completions (chat has none: up to the context).
constexpr int32_t kCompletionsDefaultMaxTokens = 16;
// OpenAI's temperature default (the gRPC API's is greedy).
constexpr float kDefaultTemperature = 1.0f;

absl::StatusOr<Json> ParseJson(absl::string_view body) {
  bool too_deep = false;
  Json::parser_callback_t depth_guard = [&too_deep](int depth, Json::parse_event_t, Json&) {
    if (depth > kMaxJsonDepth) too_deep = true;
    return !too_deep;
  };
  Json j = Json::parse(body.begin(), body.end(), depth_guard, /*allow_exceptions=*/false);
  if (too_deep) {
    return InvalidParam("", absl::StrCat("JSON nested deeper than ", kMaxJsonDepth, " levels"));
  }
  if (j.is_discarded()) {
    return InvalidParam("", "the body is not valid JSON (or not valid UTF-8)");
  }
  if (!j.is_object()) return InvalidParam("", "the body must be a JSON object");
  return j;
}

absl::StatusOr<std::optional<bool>> Bool(const Json& j, const char* key) {
  const Json* v = Field(j, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return WrongType(key, "a boolean");
  return v->get<bool>();
}

absl::StatusOr<std::optional<double>> Number(const Json& j, const char* key) {
  const Json* v = Field(j, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return WrongType(key, "a number");
  const double d = v->get<double>();
  if (!std::isfinite(d)) return WrongType(key, "a finite number");
  return d;
}

// An integer; 16.0 counts (JSON does not tell them apart), 16.5 does not.
absl::StatusOr<std::optional<int64_t>> Integer(const Json& j, const char* key) {
  const Json* v = Field(j, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return WrongType(key, "an integer in the signed 64-bit range");
    }
    return v->get<int64_t>();
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      return static_cast<int64_t>(d);
    }
  }
  return WrongType(key, "an integer");
}

// An int32 field: an integer that fits.
absl::StatusOr<std::optional<int32_t>> Int32(const Json& j, const char* key) {
  ASSIGN_OR_RETURN(std::optional<int64_t> v, Integer(j, key));
  if (!v.has_value()) return std::nullopt;
  if (*v < std::numeric_limits<int32_t>::min() || *v > std::numeric_limits<int32_t>::max()) {
    return InvalidParam(key, absl::StrCat("'", key, "' = ", *v, " is out of range"));
  }
  return static_cast<int32_t>(*v);
}

absl::StatusOr<std::optional<std::string>> String(const Json& j, const char* key) {
  const Json* v = Field(j, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return WrongType(key, "a string");
  return v->get<std::string>();
}

// Features a client may ask for that pdserve does not serve: refused
// rather than silently ignored, since the answer would not be what the
// client asked for.
absl::Status RefuseUnsupported(const Json& j) {
  for (const char* key : {"functions", "logit_bias"}) {
    const Json* v = Field(j, key);
    if (v != nullptr && !v->empty()) {
      return InvalidParam(key, absl::StrCat("'", key, "' is not supported by this server"));
    }
  }
  ASSIGN_OR_RETURN(std::optional<bool> echo, Bool(j, "echo"));
  if (echo.value_or(false)) return InvalidParam("echo", "'echo' is not supported");
  ASSIGN_OR_RETURN(std::optional<std::string> suffix, String(j, "suffix"));
  if (suffix.has_value() && !suffix->empty()) {
    return InvalidParam("suffix", "'suffix' is not supported");
  }
  for (const char* key : {"n", "best_of"}) {
    ASSIGN_OR_RETURN(std::optional<int64_t> n, Integer(j, key));
    if (n.has_value() && *n != 1) {
      return InvalidParam(key, absl::StrCat("'", key, "' = ", *n,
                                            " is not supported: this server returns one choice "
                                            "per request (send several requests instead)"));
    }
  }
  return absl::OkStatus();
}

// One message's content: a string, or an array of text parts joined.
absl::StatusOr<std::string> MessageContent(const Json& message, const std::string& param) {
  const Json* content = Field(message, "content");
  if (content == nullptr) return std::string();  // an assistant turn of tool calls only
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) return WrongType(param, "a string or an array of text parts");
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    const std::string where = absl::StrCat(param, "[", i, "]");
    if (!part.is_object()) return WrongType(where, "an object");
    const Json* type = Field(part, "type");
    if (type == nullptr || *type != "text") {
      return InvalidParam(where,
                          absl::StrCat("'", where, "': only parts of type \"text\" are supported"));
    }
    const Json* t = Field(part, "text");
    if (t == nullptr || !t->is_string()) return WrongType(where + ".text", "a string");
    text += t->get<std::string>();
  }
  return text;
}

absl::Status ParseMessages(const Json& j, v1::GenerateRequest* out) {
  const Json* messages = Field(j, "messages");
  if (messages == nullptr) return InvalidParam("messages", "'messages' is required");
  if (!messages->is_array() || messages->empty()) {
    return WrongType("messages", "a non-empty array");
  }
  v1::ChatInput* chat = out->mutable_chat();
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string where = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return WrongType(where, "an object");
    const Json* role = Field(m, "role");
    if (role == nullptr || !role->is_string()) return WrongType(where + ".role", "a string");
    std::string r = role->get<std::string>();
    // OpenAI's newer name for the system role.
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      return InvalidParam(where + ".role",
                          absl::StrCat("'", where, ".role' = \"", r,
                                       "\": must be system, developer, user, assistant or tool"));
    }
    ASSIGN_OR_RETURN(std::string content, MessageContent(m, where + ".content"));
    v1::ChatMessage* msg = chat->add_messages();
    if (const Json* calls = Field(m, "tool_calls"); calls != nullptr) {
      RETURN_IF_ERROR(ParseToolCalls(*calls, where + ".tool_calls", msg));
    }
    ASSIGN_OR_RETURN(std::optional<std::string> call_id, String(m, "tool_call_id"));
    msg->set_tool_call_id(call_id.value_or(""));
    msg->set_role(std::move(r));
    msg->set_content(std::move(content));
  }
  return absl::OkStatus();
}

// A token-id array: every element an integer in int32's range (the router
// checks them against the vocabulary).
absl::Status ParseTokenIds(const Json& ids, const std::string& param, v1::GenerateRequest* out) {
  v1::TokenIds* tokens = out->mutable_tokens();
  for (size_t i = 0; i < ids.size(); ++i) {
    const Json& id = ids[i];
    if (!id.is_number_integer() || id.get<int64_t>() < std::numeric_limits<int32_t>::min() ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return WrongType(absl::StrCat(param, "[", i, "]"), "a token id (an integer)");
    }
    tokens->add_ids(static_cast<int32_t>(id.get<int64_t>()));
  }
  return absl::OkStatus();
}

// `prompt`: a string, an array of token ids, or a batch of one of those.
absl::Status ParsePrompt(const Json& j, v1::GenerateRequest* out) {
  const Json* prompt = Field(j, "prompt");
  if (prompt == nullptr) return InvalidParam("prompt", "'prompt' is required");
  if (prompt->is_string()) {
    out->set_text(prompt->get<std::string>());
    return absl::OkStatus();
  }
  if (!prompt->is_array() || prompt->empty()) {
    return WrongType("prompt", "a string, an array of token ids, or a batch of one of those");
  }
  const Json& first = prompt->front();
  if (first.is_number()) return ParseTokenIds(*prompt, "prompt", out);
  if (prompt->size() != 1) {
    return InvalidParam("prompt", "batched prompts are not supported: send one prompt per request");
  }
  if (first.is_string()) {
    out->set_text(first.get<std::string>());
    return absl::OkStatus();
  }
  if (first.is_array() && !first.empty()) return ParseTokenIds(first, "prompt[0]", out);
  return WrongType("prompt", "a string, an array of token ids, or a batch of one of those");
}

absl::Status ParseStop(const Json& j, v1::GenerateRequest* out) {
  const Json* stop = Field(j, "stop");
  if (stop == nullptr) return absl::OkStatus();
  if (stop->is_string()) {
    out->add_stop(stop->get<std::string>());
    return absl::OkStatus();
  }
  if (!stop->is_array()) return WrongType("stop", "a string or an array of strings");
  for (const Json& s : *stop) {
    if (!s.is_string()) return WrongType("stop", "a string or an array of strings");
    out->add_stop(s.get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ParseMaxTokens(const Json& j, Endpoint endpoint, v1::GenerateRequest* out) {
  // max_completion_tokens is the newer name; it wins when both are sent.
  ASSIGN_OR_RETURN(std::optional<int32_t> newer, Int32(j, "max_completion_tokens"));
  ASSIGN_OR_RETURN(std::optional<int32_t> older, Int32(j, "max_tokens"));
  const char* param = newer.has_value() ? "max_completion_tokens" : "max_tokens";
  std::optional<int32_t> max_tokens = newer.has_value() ? newer : older;
  if (max_tokens.has_value()) {
    if (*max_tokens < 1) {
      return InvalidParam(param, absl::StrCat("'", param, "' = ", *max_tokens, ": must be >= 1"));
    }
    out->set_max_tokens(*max_tokens);
  } else if (endpoint == Endpoint::kCompletions) {
    out->set_max_tokens(kCompletionsDefaultMaxTokens);
  } else {
    out->set_max_tokens_until_context(true);
  }
  return absl::OkStatus();
}

absl::Status ParseSampling(const Json& j, v1::SamplingParams* s) {
  ASSIGN_OR_RETURN(std::optional<double> temperature, Number(j, "temperature"));
  s->set_temperature(temperature.has_value() ? static_cast<float>(*temperature)
                                             : kDefaultTemperature);
  ASSIGN_OR_RETURN(std::optional<double> top_p, Number(j, "top_p"));
  if (top_p.has_value()) s->set_top_p(static_cast<float>(*top_p));
  ASSIGN_OR_RETURN(std::optional<double> min_p, Number(j, "min_p"));
  if (min_p.has_value()) s->set_min_p(static_cast<float>(*min_p));
  ASSIGN_OR_RETURN(std::optional<double> presence, Number(j, "presence_penalty"));
  if (presence.has_value()) s->set_presence_penalty(static_cast<float>(*presence));
  ASSIGN_OR_RETURN(std::optional<double> frequency, Number(j, "frequency_penalty"));
  if (frequency.has_value()) s->set_frequency_penalty(static_cast<float>(*frequency));
  ASSIGN_OR_RETURN(std::optional<double> repetition, Number(j, "repetition_penalty"));
  if (repetition.has_value()) s->set_repetition_penalty(static_cast<float>(*repetition));
  ASSIGN_OR_RETURN(std::optional<int32_t> top_k, Int32(j, "top_k"));
  // vLLM's "off" is -1; the engine's is 0.
  if (top_k.has_value()) s->set_top_k(*top_k == -1 ? 0 : *top_k);
  ASSIGN_OR_RETURN(std::optional<int64_t> seed, Integer(j, "seed"));
  // A negative seed is as good a seed as any: its bits.
  if (seed.has_value()) s->set_seed(static_cast<uint64_t>(*seed));
  // pdserve's extension: speculative decoding on or off for this request
  // (unset: the decode worker's default). It never changes the output.
  ASSIGN_OR_RETURN(std::optional<bool> speculative, Bool(j, "speculative"));
  if (speculative.has_value()) s->set_speculative(*speculative);
  return absl::OkStatus();
}

// Chat: logprobs (bool) and top_logprobs (0..20, only with logprobs).
// Completions: logprobs is the number of alternatives (0..20).
absl::StatusOr<int32_t> ParseLogprobs(const Json& j, Endpoint endpoint) {
  if (endpoint == Endpoint::kCompletions) {
    ASSIGN_OR_RETURN(std::optional<int32_t> n, Int32(j, "logprobs"));
    if (!n.has_value()) return -1;
    if (*n < 0 || *n > kMaxTopLogprobs) {
      return InvalidParam(
          "logprobs", absl::StrCat("'logprobs' = ", *n, ": must be in [0, ", kMaxTopLogprobs, "]"));
    }
    return *n;
  }
  ASSIGN_OR_RETURN(std::optional<bool> on, Bool(j, "logprobs"));
  ASSIGN_OR_RETURN(std::optional<int32_t> top, Int32(j, "top_logprobs"));
  if (top.has_value() && (*top < 0 || *top > kMaxTopLogprobs)) {
    return InvalidParam("top_logprobs", absl::StrCat("'top_logprobs' = ", *top, ": must be in [0, ",
                                                     kMaxTopLogprobs, "]"));
  }
  if (top.has_value() && !on.value_or(false)) {
    return InvalidParam("top_logprobs", "'top_logprobs' requires 'logprobs': true");
  }
  if (!on.value_or(false)) return -1;
  return top.value_or(0);
}

absl::Status ParseStreaming(const Json& j, OpenAiRequest* out) {
  ASSIGN_OR_RETURN(std::optional<bool> stream, Bool(j, "stream"));
  out->stream = stream.value_or(false);
  if (const Json* options = Field(j, "stream_options"); options != nullptr) {
    if (!options->is_object()) return WrongType("stream_options", "an object");
    ASSIGN_OR_RETURN(std::optional<bool> usage, Bool(*options, "include_usage"));
    out->include_usage = out->stream && usage.value_or(false);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(Endpoint endpoint, absl::string_view body) {
  ASSIGN_OR_RETURN(Json j, ParseJson(body));
  OpenAiRequest out;
  out.endpoint = endpoint;
  RETURN_IF_ERROR(RefuseUnsupported(j));
  ASSIGN_OR_RETURN(std::optional<std::string> model, String(j, "model"));
  out.model = model.value_or("");
  ASSIGN_OR_RETURN(std::optional<std::string> user, String(j, "user"));
  (void)user;  // accepted for compatibility; per-client limits use the key or IP
  v1::GenerateRequest& g = out.generate;
  if (endpoint == Endpoint::kChatCompletions) {
    RETURN_IF_ERROR(ParseMessages(j, &g));
    RETURN_IF_ERROR(ParseTools(j, g.mutable_chat()));
    if (CallsTools(g.chat())) {
      for (const v1::Tool& t : g.chat().tools()) out.tools.push_back(t.name());
    }
  } else if (const Json* tools = Field(j, "tools"); tools != nullptr && !tools->empty()) {
    return InvalidParam("tools", "'tools' needs /v1/chat/completions");
  } else {
    RETURN_IF_ERROR(ParsePrompt(j, &g));
  }
  RETURN_IF_ERROR(ParseMaxTokens(j, endpoint, &g));
  RETURN_IF_ERROR(ParseStop(j, &g));
  RETURN_IF_ERROR(ParseSampling(j, g.mutable_sampling()));
  RETURN_IF_ERROR(ParseConstraint(j, g.mutable_sampling()));
  ASSIGN_OR_RETURN(std::optional<bool> ignore_eos, Bool(j, "ignore_eos"));
  g.set_ignore_eos(ignore_eos.value_or(false));
  ASSIGN_OR_RETURN(out.logprobs, ParseLogprobs(j, endpoint));
  if (out.logprobs >= 0) g.mutable_sampling()->set_logprobs(out.logprobs);
  RETURN_IF_ERROR(ParseStreaming(j, &out));
  return out;
}

}  // namespace pdserve::router::openai
