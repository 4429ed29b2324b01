// RequestValidator: turns a client's GenerateRequest into a
// ValidatedRequest (prompt token ids plus checked generation settings), or
// a status naming exactly what is wrong. This is the router's edge: nothing
// it rejects reaches a worker, and nothing a client sends can crash it.
//
//   INVALID_ARGUMENT  malformed input: no input, empty text, bad chat
//                     messages, token ids outside the vocabulary, negative
//                     max_tokens, bad sampling values (naming the field),
//                     empty/too many/too long stop strings, bad request_id;
//   OUT_OF_RANGE      well-formed but too large: prompt beyond
//                     --max_prompt_tokens, max_tokens beyond
//                     --max_tokens_limit, prompt + max_tokens beyond the
//                     model's context (the numbers are in the message).
//
// When max_tokens is unset (0) the default of 128 (or, with
// max_tokens_until_context, --max_tokens_limit) is lowered to what the
// context still holds, so a long prompt without max_tokens still runs.
//
// Holds references to the model and config, which must outlive it.
// Immutable; thread-safe.
#ifndef PDSERVE_ROUTER_CALL_REQUEST_VALIDATOR_H_
#define PDSERVE_ROUTER_CALL_REQUEST_VALIDATOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/grammar/grammar_compiler.h"
#include "common/model/model_card.h"
#include "pdserve/v1/generation.pb.h"
#include "router/call/structured_output_metrics.h"
#include "router/config/router_config.h"

namespace pdserve::router {

inline constexpr int32_t kDefaultMaxTokens = 128;

struct ValidatedRequest {
  std::vector<int32_t> prompt_tokens;
  v1::SamplingParams sampling;  // as sent; workers apply the defaults
  int32_t max_tokens = kDefaultMaxTokens;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool return_token_ids = false;
  // sampling.logprobs is set (>= 0): chunks carry token ids and logprobs.
  bool logprobs = false;
};

class RequestValidator {
 public:
  // `grammars` (optional; must outlive the validator) compiles a request's
  // structured-output constraint at admission, so a bad one is refused
  // before any worker does work.
  // `metrics` (optional) counts constrained requests, tool choices,
  // compile times and refusals.
  RequestValidator(const ModelCard& model, const RouterConfig& config,
                   GrammarCompiler* grammars = nullptr, StructuredOutputMetrics* metrics = nullptr)
      : model_(model), config_(config), grammars_(grammars), metrics_(metrics) {}

  absl::StatusOr<ValidatedRequest> Validate(const v1::GenerateRequest& request) const;

  // The prompt the model sees for text (special tokens parsed) or chat
  // input (rendered with the chat template), BOS included when the model
  // wants one. Shared by Generate and Tokenize so they always agree.
  absl::StatusOr<std::vector<int32_t>> EncodeText(const std::string& text) const;
  // `tool_grammar` (optional) receives the grammar that the chat's
  // tool_choice imposes (chat_tools.h), if any.
  absl::StatusOr<std::vector<int32_t>> EncodeChat(
      const v1::ChatInput& chat, std::optional<std::string>* tool_grammar = nullptr) const;

  // A client-chosen request id appears in every log line: printable ASCII
  // without spaces, at most 128 bytes.
  static absl::Status ValidateRequestId(const std::string& id);

 private:
  absl::StatusOr<std::vector<int32_t>> Prompt(const v1::GenerateRequest& request,
                                              std::optional<std::string>* tool_grammar) const;
  // INVALID_ARGUMENT naming `what` when `constraint` does not compile.
  absl::Status CheckConstraint(const GrammarConstraint& constraint, const char* what) const;
  // Counts an admitted request's constraint kind and tool choice.
  void CountAdmitted(const v1::GenerateRequest& request, const v1::SamplingParams& sampling) const;
  // Sets the grammar of a tool choice as the request's constraint.
  absl::Status ApplyToolGrammar(const v1::GenerateRequest& request,
                                const std::optional<std::string>& tool_grammar,
                                v1::SamplingParams* sampling) const;
  absl::StatusOr<int32_t> MaxTokens(int32_t requested, int32_t prompt_tokens,
                                    bool until_context) const;
  absl::Status ValidateStops(const v1::GenerateRequest& request) const;

  const ModelCard& model_;
  const RouterConfig& config_;
  GrammarCompiler* const grammars_;
  StructuredOutputMetrics* const metrics_;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_REQUEST_VALIDATOR_H_
