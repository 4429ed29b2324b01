#include "common/grammar/json_schema_support.h"
#include "common/grammar/grammar_compiler.h"

#include <exception>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/grammar/xgrammar_internal.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

using grammar_internal::CompiledRep;
using grammar_internal::CompilerRep;
using grammar_internal::VocabInfo;

// XGrammar's LogFatalError::what() reads "[hh:mm:ss] /build/path/file.cc:123:
// Check failed: (cond) is false: <message>\n". Clients get <message> only:
// the rest is noise and leaks the build machine's paths.
std::string CleanXGrammarMessage(std::string_view m) {
  if (!m.empty() && m[0] == '[') {
    if (size_t close = m.find("] "); close != std::string_view::npos) {
      // The source location ends at the first ":<digits>: " after the stamp.
      for (size_t i = m.find(':', close); i != std::string_view::npos; i = m.find(':', i + 1)) {
        size_t j = i + 1;
        while (j < m.size() && m[j] >= '0' && m[j] <= '9') ++j;
        if (j > i + 1 && m.substr(j, 2) == ": ") {
          m.remove_prefix(j + 2);
          break;
        }
      }
    }
  }
  if (m.substr(0, 13) == "Check failed:") {
    if (size_t f = m.find(" is false: "); f != std::string_view::npos) m.remove_prefix(f + 11);
  }
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.remove_suffix(1);
  return std::string(m);
}

// XGrammar reports bad input by throwing: xgrammar::XGrammarError and its
// subclasses (InvalidJSONSchemaError, InvalidJSONError, ...), its internal
// LogFatalError from XGRAMMAR_CHECK / LOG(FATAL) (a std::runtime_error: most
// parse errors of EBNF, regexes and schemas, and structural-tag errors,
// which it rewraps in a CHECK), and the odd std::invalid_argument /
// std::out_of_range from number parsing. All derive from std::exception.
template <typename Fn>
auto CallXGrammar(const std::string& what, Fn&& fn) -> absl::StatusOr<decltype(fn())> {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": out of memory"));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", CleanXGrammarMessage(e.what())));
  } catch (...) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": unknown error"));
  }
}

absl::Status ValidateVocab(const GrammarVocab& vocab) {
  const int64_t n = static_cast<int64_t>(vocab.token_bytes.size());
  if (n == 0) return absl::InvalidArgumentError("grammar vocabulary is empty");
  if (vocab.vocab_size < n) {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar vocab_size ", vocab.vocab_size, " is below the token count ", n));
  }
  if (vocab.stop_token_ids.empty()) {
    // Without one, a finished grammar could never end the generation.
    return absl::InvalidArgumentError("grammar vocabulary has no stop token");
  }
  for (int32_t id : vocab.stop_token_ids) {
    // XGrammar registers ids past the vocabulary as padding, never as stops.
    if (id < 0 || id >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("grammar stop token id ", id, " is outside [0, ", n, ")"));
    }
  }
  return absl::OkStatus();
}

std::shared_ptr<const VocabInfo> MakeVocabInfo(const GrammarVocab& vocab) {
  auto info = std::make_shared<VocabInfo>();
  info->vocab_size = vocab.vocab_size;
  info->stop_token_ids = vocab.stop_token_ids;
  info->never_allowed.assign(vocab.vocab_size, 1);
  for (size_t i = 0; i < vocab.token_bytes.size(); ++i) {
    info->never_allowed[i] = vocab.token_bytes[i].empty() ? 1 : 0;
  }
  for (int32_t id : vocab.stop_token_ids) info->never_allowed[id] = 0;
  return info;
}

xgrammar::CompiledGrammar CompileWith(xgrammar::GrammarCompiler& compiler,
                                      const GrammarConstraint& c) {
  switch (c.kind) {
    case GrammarKind::kJsonObject:
      return compiler.CompileBuiltinJSONGrammar();
    case GrammarKind::kJsonSchema:
      // XGrammar's defaults: any whitespace, strict (no additional
      // properties unless the schema allows them), properties in schema
      // order. any_order=true drops `required` in 0.2.9: keep it off.
      return compiler.CompileJSONSchema(c.text);
    case GrammarKind::kRegex:
      return compiler.CompileRegex(c.text);
    case GrammarKind::kEbnf:
      return compiler.CompileGrammar(c.text, "root");
    case GrammarKind::kStructuralTag:
      return compiler.CompileStructuralTag(c.text);
  }
  throw std::invalid_argument("unknown grammar kind");
}

}  // namespace

CompiledGrammar::CompiledGrammar(GrammarConstraint constraint,
                                 std::unique_ptr<grammar_internal::CompiledRep> rep,
                                 size_t memory_bytes)
    : constraint_(std::move(constraint)), rep_(std::move(rep)), memory_bytes_(memory_bytes) {}

CompiledGrammar::~CompiledGrammar() = default;

int32_t CompiledGrammar::vocab_size() const { return rep_->vocab->vocab_size; }

const std::vector<int32_t>& CompiledGrammar::stop_token_ids() const {
  return rep_->vocab->stop_token_ids;
}

absl::StatusOr<std::unique_ptr<GrammarCompiler>> GrammarCompiler::Create(GrammarVocab vocab,
                                                                         Options options) {
  if (absl::Status s = ValidateVocab(vocab); !s.ok()) return s;
  if (options.compile_threads < 1) options.compile_threads = 1;
  std::shared_ptr<const VocabInfo> info = MakeVocabInfo(vocab);
  // RAW: the strings are the tokens' bytes, no byte-level/SentencePiece
  // decoding. Stop ids are given explicitly, which also turns off XGrammar's
  // guessing of stops from token text ("</s>", "<|endoftext|>", ...).
  auto rep = CallXGrammar("building the grammar vocabulary", [&] {
    xgrammar::TokenizerInfo tokenizer(vocab.token_bytes, xgrammar::VocabType::RAW, vocab.vocab_size,
                                      vocab.stop_token_ids);
    // XGrammar's own cache dedups in-flight compiles and makes our misses
    // after an LRU eviction cheap; bounded by the same byte budget as ours.
    return std::make_unique<CompilerRep>(xgrammar::GrammarCompiler(
        tokenizer, options.compile_threads, /*cache_enabled=*/true,
        static_cast<int64_t>(options.cache_max_bytes), /*enable_dynamic_compilation=*/false));
  });
  if (!rep.ok()) return rep.status();
  return std::unique_ptr<GrammarCompiler>(
      new GrammarCompiler(std::move(info), std::move(rep).value(), options));
}

GrammarCompiler::GrammarCompiler(std::shared_ptr<const VocabInfo> vocab,
                                 std::unique_ptr<CompilerRep> rep, Options options)
    : vocab_(std::move(vocab)), rep_(std::move(rep)), options_(options) {}

GrammarCompiler::~GrammarCompiler() = default;

int32_t GrammarCompiler::vocab_size() const { return vocab_->vocab_size; }

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::Compile(
    const GrammarConstraint& constraint) {
  if (constraint.text.size() > kMaxConstraintBytes) {
    return absl::InvalidArgumentError(absl::StrCat(GrammarKindName(constraint.kind), " is ",
                                                   constraint.text.size(), " bytes; at most ",
                                                   kMaxConstraintBytes, " are allowed"));
  }
  if (constraint.kind == GrammarKind::kJsonObject && !constraint.text.empty()) {
    return absl::InvalidArgumentError("json_object takes no grammar text");
  }
  const uint64_t hash = constraint.Hash();
  {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(hash);
    // Compare the text too: the hash is 64 bits, requests are untrusted.
    if (it != index_.end() && it->second->grammar->constraint() == constraint) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->grammar;
    }
    ++misses_;
  }
  // Not under mu_: a compile can take seconds.
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = CompileUncached(constraint);
  if (!compiled.ok()) return compiled.status();
  absl::MutexLock lock(&mu_);
  return Insert(hash, *std::move(compiled));
}

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::CompileUncached(
    const GrammarConstraint& constraint) {
  // Refused before XGrammar sees it: a rule it would leave out.
  if (constraint.kind == GrammarKind::kJsonSchema) {
    if (absl::Status s = CheckJsonSchemaEnforced(constraint.text); !s.ok()) return s;
  } else if (constraint.kind == GrammarKind::kStructuralTag) {
    if (absl::Status s = CheckStructuralTagSchemas(constraint.text); !s.ok()) return s;
  }
  auto compiled = CallXGrammar(absl::StrCat("invalid ", GrammarKindName(constraint.kind)),
                               [&] { return CompileWith(rep_->compiler, constraint); });
  if (!compiled.ok()) {
    VLOG(1) << "grammar compile failed: " << compiled.status();
    return compiled.status();
  }
  const size_t bytes = compiled->MemorySizeBytes();
  return std::shared_ptr<const CompiledGrammar>(new CompiledGrammar(
      constraint, std::make_unique<CompiledRep>(*std::move(compiled), vocab_), bytes));
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::Insert(
    uint64_t hash, std::shared_ptr<const CompiledGrammar> grammar) {
  if (auto it = index_.find(hash); it != index_.end()) {
    if (it->second->grammar->constraint() == grammar->constraint()) {
      // Another thread compiled it meanwhile: share its object, drop ours.
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->grammar;
    }
    // A hash collision: the newest wins.
    cached_bytes_ -= it->second->grammar->memory_bytes();
    lru_.erase(it->second);
    index_.erase(it);
  }
  if (grammar->memory_bytes() > options_.cache_max_bytes || options_.cache_max_entries == 0) {
    return grammar;
  }
  cached_bytes_ += grammar->memory_bytes();
  lru_.push_front(Entry{hash, grammar});
  index_[hash] = lru_.begin();
  while (lru_.size() > options_.cache_max_entries || cached_bytes_ > options_.cache_max_bytes) {
    const Entry& victim = lru_.back();
    cached_bytes_ -= victim.grammar->memory_bytes();
    index_.erase(victim.hash);
    lru_.pop_back();
  }
  return grammar;
}

GrammarCompiler::CacheStats GrammarCompiler::cache_stats() const {
  absl::MutexLock lock(&mu_);
  CacheStats s;
  s.hits = hits_;
  s.misses = misses_;
  s.entries = static_cast<int64_t>(lru_.size());
  s.bytes = static_cast<int64_t>(cached_bytes_);
  return s;
}

}  // namespace pdserve
