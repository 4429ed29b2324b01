#include "router/api/openai/tool_call_parser.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/random/random.h"
#include "common/text/hermes_tool_format.h"
#include "nlohmann/json.hpp"

namespace pdserve::router::openai {
namespace {

using Json = nlohmann::ordered_json;
constexpr std::string_view kBegin = HermesToolFormat::kCallBegin;
constexpr std::string_view kEnd = HermesToolFormat::kCallEnd;

constexpr char kSpace[] = " \t\r\n\f\v";

// The length of the longest end of `s` that begins `marker` (and so may
// be the start of it, cut by the stream).
size_t PartialMarker(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

// OpenAI's ids are "call_" and 24 letters and digits.
std::string NewCallId() {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local absl::BitGen gen;
  std::string id = "call_";
  for (int i = 0; i < 24; ++i)
    id += kAlphabet[absl::Uniform<size_t>(gen, 0, sizeof(kAlphabet) - 1)];
  return id;
}

// {"name": ..., "arguments": {...}} (arguments may be absent: none, unless
// `bare`, where both keys and a known name are what makes it a call).
std::optional<ToolCallParser::Call> ParseCall(std::string_view body, bool bare,
                                              const std::vector<std::string>& names) {
  const Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) {
    return std::nullopt;
  }
  auto arguments = j.find("arguments");
  if (bare && (arguments == j.end() || j.size() != 2 ||
               std::find(names.begin(), names.end(), name->get<std::string>()) == names.end())) {
    return std::nullopt;
  }
  Json args = Json::object();
  if (arguments != j.end() && !arguments->is_null()) {
    if (!arguments->is_object()) return std::nullopt;
    args = *arguments;
  }
  return ToolCallParser::Call{
      .id = NewCallId(), .name = name->get<std::string>(), .arguments = args.dump()};
}

}  // namespace

void ToolCallParser::Release(std::string_view content, Output* out) {
  if (after_call_ && !content.empty()) {
    // The line break after a call is not content.
    const size_t text = content.find_first_not_of(kSpace);
    content.remove_prefix(text == std::string_view::npos ? content.size() : text);
    if (content.empty()) return;
    after_call_ = false;
  }
  // Trailing whitespace waits: before a call it is not content. Holding it
  // whatever the chunking keeps the answer the same however it streams.
  const size_t end = content.find_last_not_of(kSpace);
  const std::string_view space = end == std::string_view::npos ? content : content.substr(end + 1);
  content.remove_suffix(space.size());
  if (!content.empty()) {
    released_ = true;
    out->content += held_space_;
    held_space_.clear();
    out->content.append(content);
  }
  held_space_.append(space);
}

void ToolCallParser::EndCall(std::string_view body, Output* out) {
  std::optional<Call> call = ParseCall(body, /*bare=*/false, tool_names_);
  std::string space = std::move(space_before_call_);
  space_before_call_.clear();
  if (!call.has_value()) {
    held_space_ = std::move(space);
    Release(std::string(kBegin) + std::string(body) + std::string(kEnd), out);
    return;
  }
  // Text before and after the call stays apart as it was written.
  if (held_space_.empty()) held_space_ = std::move(space);
  ++calls_;
  released_ = true;
  after_call_ = true;
  out->calls.push_back(*std::move(call));
}

bool ToolCallParser::MayBeBareCall() const {
  if (released_ || inside_ || tool_names_.empty()) return false;
  const size_t first = pending_.find_first_not_of(kSpace);
  return first != std::string::npos && (pending_[first] == '{' || pending_[first] == '`');
}

namespace {

// The object of a bare answer: the text itself, or the inside of one
// Markdown code fence (```json ... ```) around it.
std::string_view BareObject(std::string_view text) {
  const size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  text = text.substr(begin, text.find_last_not_of(kSpace) - begin + 1);
  constexpr std::string_view kFence = "```";
  if (!text.starts_with(kFence)) return text;
  if (text.size() < 2 * kFence.size() || !text.ends_with(kFence)) return {};
  text = text.substr(kFence.size(), text.size() - 2 * kFence.size());
  if (text.starts_with("json")) text.remove_prefix(4);
  return text;
}

}  // namespace

ToolCallParser::Output ToolCallParser::Feed(std::string_view text) {
  Output out;
  pending_.append(text);
  if (!bare_) bare_ = MayBeBareCall();
  if (bare_) return out;  // held to the end
  while (true) {
    const std::string_view marker = inside_ ? kEnd : kBegin;
    const size_t at = pending_.find(marker);
    if (at == std::string::npos) break;
    const std::string before = pending_.substr(0, at);
    pending_.erase(0, at + marker.size());
    if (inside_) {
      EndCall(before, &out);
    } else {
      Release(before, &out);
      // The line break before a call is not content, unless the call
      // turns out not to be one.
      space_before_call_ = std::move(held_space_);
      held_space_.clear();
    }
    inside_ = !inside_;
  }
  if (!inside_) {
    const size_t keep = PartialMarker(pending_, kBegin);
    Release(std::string_view(pending_).substr(0, pending_.size() - keep), &out);
    pending_.erase(0, pending_.size() - keep);
  }
  return out;
}

ToolCallParser::Output ToolCallParser::Finish() {
  Output out;
  if (bare_) {
    bare_ = false;
    if (std::optional<Call> call = ParseCall(BareObject(pending_), /*bare=*/true, tool_names_)) {
      ++calls_;
      out.calls.push_back(*std::move(call));
      pending_.clear();
      return out;
    }
  }
  std::string rest = std::move(pending_);
  pending_.clear();
  if (inside_) rest = space_before_call_ + std::string(kBegin) + rest;  // unfinished: text
  space_before_call_.clear();
  inside_ = false;
  Release(rest, &out);
  // Whitespace alone is content only in an answer without calls.
  if (calls_ == 0) out.content += held_space_;
  held_space_.clear();
  return out;
}

}  // namespace pdserve::router::openai
