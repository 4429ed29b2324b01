#include "common/grammar/tokenizer_vocab.h"

#include <algorithm>
#include <utility>

namespace pdserve {

GrammarVocab VocabFromTokenizer(const Tokenizer& tokenizer, int32_t logits_width) {
  GrammarVocab v;
  const int32_t n = tokenizer.vocab_size();
  v.token_bytes.reserve(static_cast<size_t>(n));
  // TokenBytes already gives "" for CONTROL, UNKNOWN and UNUSED tokens.
  for (int32_t id = 0; id < n; ++id) v.token_bytes.push_back(tokenizer.TokenBytes(id));
  v.vocab_size = std::max(logits_width, n);
  v.stop_token_ids = tokenizer.eog_ids();
  return v;
}

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompileConstraint(
    GrammarCompiler& compiler, const std::optional<GrammarConstraint>& constraint) {
  if (!constraint.has_value()) return nullptr;
  return compiler.Compile(*constraint);
}

absl::StatusOr<std::unique_ptr<GrammarCompiler>> NewGrammarCompiler(const Tokenizer& tokenizer,
                                                                    int32_t logits_width) {
  return GrammarCompiler::Create(VocabFromTokenizer(tokenizer, logits_width));
}

}  // namespace pdserve
