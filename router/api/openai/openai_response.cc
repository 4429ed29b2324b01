#include "router/api/openai/openai_response.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "router/api/openai/openai_error.h"

namespace pdserve::router::openai {
namespace {

using Json = nlohmann::json;

Json BytesOf(const std::string& s) {
  Json bytes = Json::array();
  for (unsigned char c : s) bytes.push_back(static_cast<int>(c));
  return bytes;
}

// A proto message in its JSON form (field names as in the .proto).
Json CallJson(const ToolCallParser::Call& call) {
  return Json{{"id", call.id},
              {"type", "function"},
              {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

Json ProtoJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  std::string s;
  if (!google::protobuf::util::MessageToJsonString(m, &s, o).ok()) return nullptr;
  return Json::parse(s, nullptr, /*allow_exceptions=*/false);
}

}  // namespace

const char* FinishReasonName(v1::FinishReason reason) {
  return reason == v1::FINISH_REASON_LENGTH ? "length" : "stop";
}

OpenAiResponse::OpenAiResponse(const Tokenizer& tokenizer, Options options)
    : tokenizer_(tokenizer), options_(std::move(options)) {
  if (!options_.tools.empty() && options_.endpoint == Endpoint::kChatCompletions) {
    tools_.emplace(options_.tools);
  }
  if (options_.logprobs >= 0) {
    logprobs_ = options_.endpoint == Endpoint::kChatCompletions
                    ? Json{{"content", Json::array()}}
                    : Json{{"tokens", Json::array()},
                           {"token_logprobs", Json::array()},
                           {"top_logprobs", Json::array()},
                           {"text_offset", Json::array()}};
  }
}

void OpenAiResponse::Start(const v1::Started& started) {
  const char* prefix = options_.endpoint == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-";
  id_ = absl::StrCat(prefix, started.request_id());
}

Json OpenAiResponse::Envelope(const char* object) const {
  return Json{{"id", id_},
              {"object", object},
              {"created", options_.created},
              {"model", options_.model},
              {"system_fingerprint", nullptr}};
}

Json OpenAiResponse::Choice(Json content, const Json& logprobs, const Json& finish_reason) const {
  Json choice = {{"index", 0}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
  choice[options_.endpoint == Endpoint::kCompletions ? "text" : "delta"] = std::move(content);
  return choice;
}

Json OpenAiResponse::ChatTokenLogprob(int32_t token, float logprob) const {
  const std::string bytes = tokenizer_.IsValidId(token) ? tokenizer_.TokenBytes(token) : "";
  return Json{{"token", bytes}, {"logprob", logprob}, {"bytes", BytesOf(bytes)}};
}

Json OpenAiResponse::Logprobs(const v1::Chunk& chunk) {
  if (options_.logprobs < 0) return nullptr;
  const bool chat = options_.endpoint == Endpoint::kChatCompletions;
  Json out = chat ? Json{{"content", Json::array()}}
                  : Json{{"tokens", Json::array()},
                         {"token_logprobs", Json::array()},
                         {"top_logprobs", Json::array()},
                         {"text_offset", Json::array()}};
  for (const v1::TokenLogprobs& t : chunk.logprobs()) {
    if (chat) {
      Json entry = ChatTokenLogprob(t.token(), t.logprob());
      Json top = Json::array();
      for (const v1::TopLogprob& alt : t.top())
        top.push_back(ChatTokenLogprob(alt.token(), alt.logprob()));
      entry["top_logprobs"] = std::move(top);
      out["content"].push_back(std::move(entry));
      continue;
    }
    const std::string text =
        tokenizer_.IsValidId(t.token()) ? tokenizer_.TokenBytes(t.token()) : "";
    Json top = Json::object();
    for (const v1::TopLogprob& alt : t.top()) {
      top[tokenizer_.IsValidId(alt.token()) ? tokenizer_.TokenBytes(alt.token()) : ""] =
          alt.logprob();
    }
    out["tokens"].push_back(text);
    out["token_logprobs"].push_back(t.logprob());
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(text_offset_);
    text_offset_ += static_cast<int64_t>(text.size());
  }
  return out;
}

std::string OpenAiResponse::Event(const Json& doc) {
  return absl::StrCat("data: ", JsonText(doc), "\n\n");
}

std::string OpenAiResponse::StreamStart() {
  if (options_.endpoint != Endpoint::kChatCompletions) return "";
  Json doc = Envelope("chat.completion.chunk");
  doc["choices"] =
      Json::array({Choice(Json{{"role", "assistant"}, {"content", ""}}, nullptr, nullptr)});
  if (options_.include_usage) doc["usage"] = nullptr;
  return Event(doc);
}

Json OpenAiResponse::ToolDelta(const ToolCallParser::Output& released, int first_index) {
  Json delta = Json::object();
  if (!released.content.empty()) delta["content"] = released.content;
  if (released.calls.empty()) return delta;
  Json calls = Json::array();
  for (size_t i = 0; i < released.calls.size(); ++i) {
    Json call = CallJson(released.calls[i]);
    call["index"] = first_index + static_cast<int>(i);
    calls.push_back(std::move(call));
  }
  delta["tool_calls"] = std::move(calls);
  return delta;
}

const char* OpenAiResponse::FinishReason(const v1::Finished& finished, int calls) const {
  if (calls > 0 && finished.reason() != v1::FINISH_REASON_LENGTH) return "tool_calls";
  return FinishReasonName(finished.reason());
}

std::string OpenAiResponse::StreamChunk(const v1::Chunk& chunk) {
  Json logprobs = Logprobs(chunk);
  if (chunk.text().empty() && chunk.logprobs_size() == 0) return "";
  const bool chat = options_.endpoint == Endpoint::kChatCompletions;
  Json doc = Envelope(chat ? "chat.completion.chunk" : "text_completion");
  Json content = chat ? Json{{"content", chunk.text()}} : Json(chunk.text());
  if (tools_.has_value()) {
    const int first_index = tools_->calls();
    content = ToolDelta(tools_->Feed(chunk.text()), first_index);
    // Text that may open a call waits until the parser knows.
    if (content.empty() && logprobs.is_null()) return "";
  }
  doc["choices"] = Json::array({Choice(std::move(content), logprobs, nullptr)});
  if (options_.include_usage) doc["usage"] = nullptr;
  return Event(doc);
}

std::string OpenAiResponse::StreamEnd(const v1::Finished& finished) {
  const bool chat = options_.endpoint == Endpoint::kChatCompletions;
  Json doc = Envelope(chat ? "chat.completion.chunk" : "text_completion");
  Json content = chat ? Json::object() : Json("");
  int calls = 0;
  if (tools_.has_value()) {
    const int first_index = tools_->calls();
    content = ToolDelta(tools_->Finish(), first_index);  // what was held to the end
    calls = tools_->calls();
  }
  doc["choices"] =
      Json::array({Choice(std::move(content), nullptr, FinishReason(finished, calls))});
  if (options_.include_usage) doc["usage"] = nullptr;
  AddExtensions(finished, &doc);
  std::string out = Event(doc);
  if (options_.include_usage) {
    Json usage = Envelope(chat ? "chat.completion.chunk" : "text_completion");
    usage["choices"] = Json::array();
    usage["usage"] = Usage(finished);
    absl::StrAppend(&out, Event(usage));
  }
  absl::StrAppend(&out, "data: [DONE]\n\n");
  return out;
}

void OpenAiResponse::Append(const v1::Chunk& chunk) {
  text_ += chunk.text();
  Json more = Logprobs(chunk);
  if (more.is_null()) return;
  for (auto& [key, values] : more.items()) {
    for (Json& v : values) logprobs_[key].push_back(std::move(v));
  }
}

std::string OpenAiResponse::Whole(const v1::Finished& finished) const {
  const bool chat = options_.endpoint == Endpoint::kChatCompletions;
  Json doc = Envelope(chat ? "chat.completion" : "text_completion");
  Json content = chat ? Json{{"role", "assistant"}, {"content", text_}} : Json(text_);
  int calls = 0;
  if (chat && !options_.tools.empty()) {
    ToolCallParser parser(options_.tools);
    ToolCallParser::Output all = parser.Feed(text_);
    ToolCallParser::Output rest = parser.Finish();
    all.content += rest.content;
    for (ToolCallParser::Call& c : rest.calls) all.calls.push_back(std::move(c));
    calls = parser.calls();
    // OpenAI's shape: content null when the answer is only calls.
    content["content"] = all.content.empty() && calls > 0 ? Json(nullptr) : Json(all.content);
    if (calls > 0) {
      Json list = Json::array();
      for (const ToolCallParser::Call& c : all.calls) list.push_back(CallJson(c));
      content["tool_calls"] = std::move(list);
    }
  }
  Json choice = {{"index", 0},
                 {"logprobs", logprobs_.is_null() ? Json(nullptr) : logprobs_},
                 {"finish_reason", FinishReason(finished, calls)}};
  choice[chat ? "message" : "text"] = std::move(content);
  doc["choices"] = Json::array({std::move(choice)});
  doc["usage"] = Usage(finished);
  AddExtensions(finished, &doc);
  return JsonText(doc);
}

Json OpenAiResponse::Usage(const v1::Finished& finished) const {
  const v1::Usage& u = finished.usage();
  return Json{{"prompt_tokens", u.prompt_tokens()},
              {"completion_tokens", u.completion_tokens()},
              {"total_tokens", u.prompt_tokens() + u.completion_tokens()},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_prompt_tokens()}}}};
}

void OpenAiResponse::AddExtensions(const v1::Finished& finished, Json* doc) const {
  (*doc)["timings"] = ProtoJson(finished.timings());
  (*doc)["placement"] = ProtoJson(finished.placement());
}

}  // namespace pdserve::router::openai
