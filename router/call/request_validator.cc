#include "router/call/request_validator.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status_macros.h"
#include "common/request/sampling_params.h"
#include "common/request/sampling_proto.h"
#include "common/text/chat_template.h"
#include "router/call/chat_tools.h"

namespace pdserve::router {
absl::Status RequestValidator::ValidateRequestId(const std::string& id) {
  if (id.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("request_id is ", id.size(), " bytes; at most 128 are allowed"));
  }
  for (char c : id) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          "request_id may contain only printable ASCII characters without spaces");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> RequestValidator::EncodeText(const std::string& text) const {
  if (text.empty()) return absl::InvalidArgumentError("text is empty");
  return model_.tokenizer().EncodePrompt(text);
}

absl::StatusOr<std::vector<int32_t>> RequestValidator::EncodeChat(
    const v1::ChatInput& chat, std::optional<std::string>* tool_grammar) const {
  const ChatTemplate& chat_template = model_.chat_template();
  absl::StatusOr<PreparedChat> prepared = PrepareChat(chat, chat_template.supports_tools());
  if (!prepared.ok() && metrics_ != nullptr) {
    metrics_->CountRefusal(StructuredOutputMetrics::Refusal::kTools);
  }
  absl::StatusOr<std::string> rendered =
      prepared.ok() ? chat_template.Render(prepared->messages, /*add_generation_prompt=*/true,
                                           prepared->tools)
                    : prepared.status();
  if (!rendered.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("chat: ", rendered.status().message()));
  }
  if (tool_grammar != nullptr) *tool_grammar = std::move(prepared->tool_grammar);
  return EncodeText(*rendered);
}

absl::StatusOr<std::vector<int32_t>> RequestValidator::Prompt(
    const v1::GenerateRequest& request, std::optional<std::string>* tool_grammar) const {
  switch (request.input_case()) {
    case v1::GenerateRequest::kText:
      return EncodeText(request.text());
    case v1::GenerateRequest::kChat:
      return EncodeChat(request.chat(), tool_grammar);
    case v1::GenerateRequest::kTokens: {
      const auto& ids = request.tokens().ids();
      if (ids.empty()) return absl::InvalidArgumentError("tokens.ids is empty");
      const Tokenizer& tok = model_.tokenizer();
      for (int i = 0; i < ids.size(); ++i) {
        if (!tok.IsValidId(ids[i])) {
          return absl::InvalidArgumentError(absl::StrCat("tokens.ids[", i, "] = ", ids[i],
                                                         " is outside the vocabulary [0, ",
                                                         tok.vocab_size(), ")"));
        }
      }
      return std::vector<int32_t>(ids.begin(), ids.end());
    }
    case v1::GenerateRequest::INPUT_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("exactly one of text, chat or tokens must be set");
}

absl::StatusOr<int32_t> RequestValidator::MaxTokens(int32_t requested, int32_t prompt_tokens,
                                                    bool until_context) const {
  const int32_t context = model_.config().context_length;
  if (requested < 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens = ", requested,
                                                   " is invalid: must be >= 1 (0 = default ",
                                                   kDefaultMaxTokens, ")"));
  }
  if (requested > config_.max_tokens_limit) {
    return absl::OutOfRangeError(absl::StrCat(
        "max_tokens = ", requested, " exceeds the server limit of ", config_.max_tokens_limit));
  }
  const int32_t room = context - prompt_tokens;
  const int32_t default_max =
      until_context ? std::min(config_.max_tokens_limit, room) : std::min(kDefaultMaxTokens, room);
  const int32_t max_tokens = requested == 0 ? default_max : requested;
  if (max_tokens < 1 || prompt_tokens + max_tokens > context) {
    return absl::OutOfRangeError(
        absl::StrCat("prompt (", prompt_tokens, " tokens) + max_tokens (", std::max(max_tokens, 1),
                     ") = ", prompt_tokens + std::max(max_tokens, 1),
                     " exceeds the model's context length of ", context, " tokens"));
  }
  return max_tokens;
}

absl::Status RequestValidator::ValidateStops(const v1::GenerateRequest& request) const {
  if (request.stop_size() > config_.max_stop_strings) {
    return absl::InvalidArgumentError(absl::StrCat("stop has ", request.stop_size(),
                                                   " strings; at most ", config_.max_stop_strings,
                                                   " are allowed"));
  }
  for (int i = 0; i < request.stop_size(); ++i) {
    const std::string& s = request.stop(i);
    if (s.empty()) return absl::InvalidArgumentError(absl::StrCat("stop[", i, "] is empty"));
    if (static_cast<int64_t>(s.size()) > config_.max_stop_string_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop[", i, "] is ", s.size(), " bytes; at most ",
                       config_.max_stop_string_bytes, " are allowed"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ValidatedRequest> RequestValidator::Validate(
    const v1::GenerateRequest& request) const {
  ValidatedRequest out;
  RETURN_IF_ERROR(ValidateRequestId(request.request_id()));
  const SamplingParams sampling = FromProto(request.sampling());
  RETURN_IF_ERROR(ValidateSamplingParams(sampling));
  if (sampling.constraint.has_value()) {
    if (absl::Status s = CheckConstraint(*sampling.constraint, "sampling.constraint"); !s.ok()) {
      if (metrics_ != nullptr) metrics_->CountRefusal(StructuredOutputMetrics::Refusal::kConstraint);
      return s;
    }
  }
  RETURN_IF_ERROR(ValidateStops(request));
  std::optional<std::string> tool_grammar;
  ASSIGN_OR_RETURN(out.prompt_tokens, Prompt(request, &tool_grammar));
  const int32_t n = static_cast<int32_t>(out.prompt_tokens.size());
  if (n > config_.max_prompt_tokens) {
    return absl::OutOfRangeError(
        absl::StrCat("prompt is ", n, " tokens; the server limit is ", config_.max_prompt_tokens));
  }
  ASSIGN_OR_RETURN(out.max_tokens,
                   MaxTokens(request.max_tokens(), n, request.max_tokens_until_context()));
  out.sampling = request.sampling();
  if (absl::Status s = ApplyToolGrammar(request, tool_grammar, &out.sampling); !s.ok()) {
    if (metrics_ != nullptr) metrics_->CountRefusal(StructuredOutputMetrics::Refusal::kTools);
    return s;
  }
  CountAdmitted(request, out.sampling);
  out.stop.assign(request.stop().begin(), request.stop().end());
  out.ignore_eos = request.ignore_eos();
  out.return_token_ids = request.return_token_ids();
  out.logprobs = sampling.logprobs >= 0;
  return out;
}

absl::Status RequestValidator::CheckConstraint(const GrammarConstraint& constraint,
                                               const char* what) const {
  if (grammars_ == nullptr) return absl::OkStatus();
  // Compiled (and cached) here for its error: the workers compile it again
  // from their own caches, which this warms for nobody.
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = grammars_->Compile(constraint);
  if (metrics_ != nullptr) metrics_->ObserveCompile(absl::ToDoubleSeconds(absl::Now() - start));
  if (!compiled.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", compiled.status().message()));
  }
  return absl::OkStatus();
}

absl::Status RequestValidator::ApplyToolGrammar(const v1::GenerateRequest& request,
                                                const std::optional<std::string>& tool_grammar,
                                                v1::SamplingParams* sampling) const {
  const bool calls_tools = request.input_case() == v1::GenerateRequest::kChat &&
                           !request.chat().tools().empty() &&
                           request.chat().tool_choice().mode() != v1::ToolChoice::NONE;
  if (calls_tools && sampling->has_constraint()) {
    // A tool call is not what a schema or grammar for the answer allows.
    return absl::InvalidArgumentError(
        "sampling.constraint cannot be combined with tools (unless tool_choice is none)");
  }
  if (!tool_grammar.has_value()) return absl::OkStatus();
  RETURN_IF_ERROR(CheckConstraint(GrammarConstraint::StructuralTag(*tool_grammar), "tools"));
  sampling->mutable_constraint()->set_structural_tag(*tool_grammar);
  return absl::OkStatus();
}

void RequestValidator::CountAdmitted(const v1::GenerateRequest& request,
                                     const v1::SamplingParams& sampling) const {
  if (metrics_ == nullptr) return;
  if (request.input_case() == v1::GenerateRequest::kChat && !request.chat().tools().empty()) {
    metrics_->CountToolChoice(request.chat().tool_choice().mode());
  }
  const std::optional<GrammarConstraint> constraint = FromProto(sampling).constraint;
  if (constraint.has_value()) metrics_->CountConstrained(constraint->kind);
}

}  // namespace pdserve::router
