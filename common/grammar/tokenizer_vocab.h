// The vocabulary a GrammarCompiler needs, read off a model's Tokenizer:
// every token's raw bytes (so a grammar sees what a token writes, whatever
// the vocabulary's own alphabet), "" for the tokens that are not text
// (CONTROL, UNKNOWN, UNUSED: a special token such as <|im_start|> must never
// appear inside a JSON string), the end-of-generation ids as stop tokens, and
// the logits width (the output matrix may have padding rows past the
// vocabulary, which are never allowed).
#ifndef PDSERVE_COMMON_GRAMMAR_TOKENIZER_VOCAB_H_
#define PDSERVE_COMMON_GRAMMAR_TOKENIZER_VOCAB_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "common/grammar/grammar_compiler.h"
#include "common/request/grammar_constraint.h"
#include "common/text/tokenizer.h"

namespace pdserve {

// `logits_width` >= tokenizer.vocab_size().
GrammarVocab VocabFromTokenizer(const Tokenizer& tokenizer, int32_t logits_width);

// The compiled form of `constraint` (null: no constraint), or the compile
// error as INVALID_ARGUMENT. May take tens of ms on a cache miss: call it
// off the engine thread.
absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompileConstraint(
    GrammarCompiler& compiler, const std::optional<GrammarConstraint>& constraint);

// The compiler for a model's vocabulary (~30-140 ms on real vocabularies).
absl::StatusOr<std::unique_ptr<GrammarCompiler>> NewGrammarCompiler(const Tokenizer& tokenizer,
                                                                    int32_t logits_width);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_GRAMMAR_TOKENIZER_VOCAB_H_
