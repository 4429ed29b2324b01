// Private to common/grammar/: the XGrammar objects behind GrammarCompiler,
// CompiledGrammar and GrammarMatcher. Only grammar_compiler.cc and
// grammar_matcher.cc include this (and through it XGrammar's headers); the
// public headers forward-declare these structs.
#ifndef PDSERVE_COMMON_GRAMMAR_XGRAMMAR_INTERNAL_H_
#define PDSERVE_COMMON_GRAMMAR_XGRAMMAR_INTERNAL_H_

#include <xgrammar/xgrammar.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace pdserve {
namespace grammar_internal {

// What matchers need of the vocabulary without asking XGrammar, which logs a
// warning to stderr for every out-of-range or special token it is offered.
struct VocabInfo {
  int32_t vocab_size = 0;
  std::vector<int32_t> stop_token_ids;
  // 1 where the token can never be accepted: "" (special) and not a stop
  // token, or a padding id past the vocabulary.
  std::vector<uint8_t> never_allowed;
};

struct CompiledRep {
  CompiledRep(xgrammar::CompiledGrammar g, std::shared_ptr<const VocabInfo> v)
      : compiled(std::move(g)), vocab(std::move(v)) {}
  xgrammar::CompiledGrammar compiled;  // a shared handle to XGrammar's data
  std::shared_ptr<const VocabInfo> vocab;
};

struct CompilerRep {
  explicit CompilerRep(xgrammar::GrammarCompiler c) : compiler(std::move(c)) {}
  xgrammar::GrammarCompiler compiler;
};

}  // namespace grammar_internal
}  // namespace pdserve

#endif  // PDSERVE_COMMON_GRAMMAR_XGRAMMAR_INTERNAL_H_
