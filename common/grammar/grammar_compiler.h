// GrammarCompiler: turns a GrammarConstraint into a CompiledGrammar for one
// model's vocabulary, with XGrammar (the pinned sdist built by
// scripts/build-xgrammar.sh) underneath. common/grammar/ is the only code
// that includes XGrammar headers: its C++ API is not promised stable, and
// these headers expose none of its types.
//
// One GrammarCompiler per loaded model, built once from the vocabulary (that
// takes ~30-140 ms on real vocabularies). Compile() costs tens of ms up to
// seconds for large tool schemas: call it off the engine thread. Results are
// kept in a bounded LRU keyed by GrammarConstraint::Hash(), so repeated
// response_format/tool schemas cost one compile.
//
// Errors: a bad schema, regex, grammar or structural tag, an unsupported
// schema feature, or text over kMaxConstraintBytes give INVALID_ARGUMENT
// carrying XGrammar's message (XGrammar reports them by throwing; nothing
// escapes these classes).
//
// Threading: GrammarCompiler is thread-safe; concurrent Compile() calls run
// in parallel (the cache lock is not held while compiling; two callers may
// compile the same constraint at once, and then both get the first one cached).
// CompiledGrammar is immutable and shared by any number of GrammarMatchers on
// any threads; it keeps the compiler's vocabulary alive by itself.
#ifndef PDSERVE_COMMON_GRAMMAR_GRAMMAR_COMPILER_H_
#define PDSERVE_COMMON_GRAMMAR_GRAMMAR_COMPILER_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/request/grammar_constraint.h"
#include "common/request/sampling_params.h"

namespace pdserve {

// The model vocabulary as the grammar engine needs it.
struct GrammarVocab {
  // Each token id's raw decoded bytes (Tokenizer::TokenBytes). Give "" for
  // CONTROL, UNUSED and UNKNOWN tokens: "" is the only way to tell XGrammar a
  // token is special, and a special token's text (e.g. "<|im_start|>") would
  // otherwise be allowed inside JSON strings. Tokens given "" are never
  // allowed by a mask, except stop tokens.
  std::vector<std::string> token_bytes;
  // The logits width; >= token_bytes.size(). Ids past token_bytes (padding
  // rows of the output matrix) are never allowed.
  int32_t vocab_size = 0;
  // End-of-generation ids (Tokenizer eog ids). Non-empty, each <
  // token_bytes.size(). Allowed exactly where the grammar may end; accepting
  // one terminates the matcher. Their text does not matter.
  std::vector<int32_t> stop_token_ids;
};

namespace grammar_internal {
struct VocabInfo;
struct CompiledRep;
struct CompilerRep;
}  // namespace grammar_internal

// The result of a compile: immutable, shared (std::shared_ptr<const>) by the
// cache and every matcher using it.
class CompiledGrammar {
 public:
  ~CompiledGrammar();
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const GrammarConstraint& constraint() const { return constraint_; }
  // XGrammar's estimate of its memory use; what the cache's byte bound counts.
  size_t memory_bytes() const { return memory_bytes_; }
  int32_t vocab_size() const;
  const std::vector<int32_t>& stop_token_ids() const;

 private:
  friend class GrammarCompiler;
  friend class GrammarMatcher;
  CompiledGrammar(GrammarConstraint constraint, std::unique_ptr<grammar_internal::CompiledRep> rep,
                  size_t memory_bytes);

  const GrammarConstraint constraint_;
  const std::unique_ptr<grammar_internal::CompiledRep> rep_;
  const size_t memory_bytes_;
};

class GrammarCompiler {
 public:
  // Constraint text above the request limit (common/request's
  // kMaxConstraintBytes) is refused before compiling: compile time and
  // memory grow with the text, and it bounds what one request can make us do.
  static constexpr size_t kMaxConstraintBytes = ::pdserve::kMaxConstraintBytes;

  struct Options {
    // Threads XGrammar uses inside one compile. 1: compiles already run on
    // request threads, and more threads per compile only help huge schemas.
    int compile_threads = 1;
    // LRU bounds; an entry is evicted when either is exceeded. A compiled
    // grammar is ~1-3 MB on 50k-260k vocabularies. A single grammar above
    // cache_max_bytes is returned but not cached.
    size_t cache_max_entries = 128;
    size_t cache_max_bytes = size_t{256} << 20;
  };

  struct CacheStats {
    int64_t hits = 0;
    int64_t misses = 0;  // compiles started
    int64_t entries = 0;
    int64_t bytes = 0;
  };

  // Validates `vocab` (INVALID_ARGUMENT when inconsistent) and builds
  // XGrammar's tokenizer info from it.
  static absl::StatusOr<std::unique_ptr<GrammarCompiler>> Create(GrammarVocab vocab,
                                                                 Options options);
  static absl::StatusOr<std::unique_ptr<GrammarCompiler>> Create(GrammarVocab vocab) {
    return Create(std::move(vocab), Options());
  }
  ~GrammarCompiler();

  // The compiled grammar for `constraint`, from the cache when present. The
  // same constraint returns the same object while it stays cached.
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(
      const GrammarConstraint& constraint) ABSL_LOCKS_EXCLUDED(mu_);

  int32_t vocab_size() const;
  CacheStats cache_stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    uint64_t hash;
    std::shared_ptr<const CompiledGrammar> grammar;
  };
  using Lru = std::list<Entry>;  // most recently used first

  GrammarCompiler(std::shared_ptr<const grammar_internal::VocabInfo> vocab,
                  std::unique_ptr<grammar_internal::CompilerRep> rep, Options options);
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompileUncached(
      const GrammarConstraint& constraint);
  // Caches `grammar` (unless over the byte bound) and returns the object to
  // hand out: an equal one already cached wins, so all callers share it.
  std::shared_ptr<const CompiledGrammar> Insert(uint64_t hash,
                                                std::shared_ptr<const CompiledGrammar> grammar)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<const grammar_internal::VocabInfo> vocab_;
  // xgrammar::GrammarCompiler; its Compile* methods are thread-safe.
  const std::unique_ptr<grammar_internal::CompilerRep> rep_;
  const Options options_;

  mutable absl::Mutex mu_;
  Lru lru_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Lru::iterator> index_ ABSL_GUARDED_BY(mu_);
  size_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_GRAMMAR_GRAMMAR_COMPILER_H_
