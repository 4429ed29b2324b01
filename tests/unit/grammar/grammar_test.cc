// Tests for common/grammar/ (GrammarCompiler, GrammarMatcher, ApplyMask) on a
// tiny hand-made byte vocabulary, so no model file is needed.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/grammar/grammar_compiler.h"
#include "common/request/grammar_constraint.h"
#include "common/grammar/grammar_matcher.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

// Token ids of the test vocabulary.
enum : int32_t {
  kEos = 0,  // stop token, given as "" like a CONTROL token
  kLBrace,
  kRBrace,
  kQuote,
  kColon,
  kComma,
  kName,  // "name"
  kAge,   // "age"
  kCapB,
  kO,
  kB,
  kOne,
  kTwo,
  kX,
  kSpace,
  kImStart,  // a CONTROL token ("<|im_start|>"), blanked to ""
  kNumTokens,
};
// Wider than the vocabulary: ids 16..39 are padding rows of the logits, and
// the mask spans two words, the second one partial.
constexpr int32_t kVocabSize = 40;

GrammarVocab TestVocab() {
  GrammarVocab v;
  v.token_bytes = {"", "{", "}", "\"", ":", ",", "name", "age", "B", "o", "b", "1", "2", "x", " ",
                   ""};
  v.vocab_size = kVocabSize;
  v.stop_token_ids = {kEos};
  return v;
}

constexpr char kPersonSchema[] =
    R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},)"
    R"("required":["name","age"]})";

bool Allowed(const std::vector<uint32_t>& words, int32_t id) {
  return (words[id / 32] >> (id % 32)) & 1u;
}

std::vector<int32_t> AllowedIds(const std::vector<uint32_t>& words) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < kVocabSize; ++id) {
    if (Allowed(words, id)) ids.push_back(id);
  }
  return ids;
}

class GrammarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = GrammarCompiler::Create(TestVocab());
    ASSERT_TRUE(c.ok()) << c.status();
    compiler_ = std::move(c).value();
  }

  std::shared_ptr<const CompiledGrammar> CompileOk(const GrammarConstraint& constraint) {
    auto g = compiler_->Compile(constraint);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? *g : nullptr;
  }

  // Walks `tokens` (ending in kEos), checking at each step that the mask
  // allows the next token and never a special or padding id.
  void WalkToTermination(GrammarMatcher& m, const std::vector<int32_t>& tokens) {
    std::vector<uint32_t> words;
    for (int32_t t : tokens) {
      ASSERT_FALSE(m.IsTerminated());
      m.FillMask(&words);
      ASSERT_EQ(words.size(), 2u);
      EXPECT_TRUE(Allowed(words, t)) << "token " << t << " after " << m.num_accepted();
      EXPECT_FALSE(Allowed(words, kImStart));
      for (int32_t pad = kNumTokens; pad < kVocabSize; ++pad) EXPECT_FALSE(Allowed(words, pad));
      ASSERT_TRUE(m.Accept(t)) << "token " << t;
    }
    EXPECT_TRUE(m.IsTerminated());
  }

  std::unique_ptr<GrammarCompiler> compiler_;
};

// {"name":"Bob","age":12}</s>
const std::vector<int32_t> kBob = {kLBrace, kQuote, kName, kQuote, kColon, kQuote, kCapB,
                                   kO,      kB,     kQuote, kComma, kQuote, kAge,  kQuote,
                                   kColon,  kOne,   kTwo,   kRBrace, kEos};

TEST_F(GrammarTest, JsonSchemaMasksWalkValidDocumentToTermination) {
  auto g = CompileOk(GrammarConstraint::JsonSchema(kPersonSchema));
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  WalkToTermination(m, kBob);
  EXPECT_EQ(m.num_accepted(), static_cast<int>(kBob.size()));
  // After termination: only the stop token, and every token is refused.
  std::vector<uint32_t> words;
  EXPECT_TRUE(m.FillMask(&words));
  EXPECT_EQ(AllowedIds(words), std::vector<int32_t>{kEos});
  EXPECT_FALSE(m.Accept(kRBrace));
  EXPECT_FALSE(m.Accept(kEos));
}

TEST_F(GrammarTest, FirstMaskAllowsOnlyOpeningBrace) {
  GrammarMatcher m(CompileOk(GrammarConstraint::JsonSchema(kPersonSchema)));
  std::vector<uint32_t> words;
  EXPECT_TRUE(m.FillMask(&words));
  // No whitespace before the root value (any_whitespace applies inside it).
  EXPECT_EQ(AllowedIds(words), std::vector<int32_t>{kLBrace});
}

TEST_F(GrammarTest, InvalidTokensAreRefusedWithoutChangingState) {
  GrammarMatcher m(CompileOk(GrammarConstraint::JsonSchema(kPersonSchema)));
  std::vector<uint32_t> before, after;
  m.FillMask(&before);
  EXPECT_FALSE(m.Accept(kX));
  EXPECT_FALSE(m.Accept(kEos));      // the grammar is not complete yet
  EXPECT_FALSE(m.Accept(kImStart));  // special: never allowed
  EXPECT_FALSE(m.Accept(20));        // padding id
  EXPECT_FALSE(m.Accept(-1));
  EXPECT_FALSE(m.Accept(kVocabSize));
  EXPECT_EQ(m.num_accepted(), 0);
  m.FillMask(&after);
  EXPECT_EQ(before, after);
  EXPECT_TRUE(m.Accept(kLBrace));
  EXPECT_FALSE(m.Accept(kRBrace));  // "name" and "age" are required
}

TEST_F(GrammarTest, ControlTokenTextIsNotAllowedInsideJsonStrings) {
  GrammarMatcher m(CompileOk(GrammarConstraint::JsonSchema(kPersonSchema)));
  for (int32_t t : {kLBrace, kQuote, kName, kQuote, kColon, kQuote}) ASSERT_TRUE(m.Accept(t));
  std::vector<uint32_t> words;
  m.FillMask(&words);
  EXPECT_TRUE(Allowed(words, kX));  // inside the "name" string
  EXPECT_FALSE(Allowed(words, kImStart));
  EXPECT_FALSE(m.Accept(kImStart));
}

TEST_F(GrammarTest, RollbackRestoresState) {
  GrammarMatcher m(CompileOk(GrammarConstraint::JsonSchema(kPersonSchema)));
  const std::vector<int32_t> prefix(kBob.begin(), kBob.begin() + 15);  // ... "age":
  for (int32_t t : prefix) ASSERT_TRUE(m.Accept(t));
  std::vector<uint32_t> at_value, words;
  m.FillMask(&at_value);
  EXPECT_TRUE(Allowed(at_value, kOne));
  EXPECT_FALSE(Allowed(at_value, kX));
  ASSERT_TRUE(m.Accept(kOne));
  ASSERT_TRUE(m.Accept(kTwo));
  m.Rollback(2);
  EXPECT_EQ(m.num_accepted(), 15);
  m.FillMask(&words);
  EXPECT_EQ(words, at_value);
  EXPECT_FALSE(m.Accept(kX));
  ASSERT_TRUE(m.Accept(kTwo));
  ASSERT_TRUE(m.Accept(kRBrace));
  ASSERT_TRUE(m.Accept(kEos));
  EXPECT_TRUE(m.IsTerminated());
  // Rolling back the stop token un-terminates.
  m.Rollback(1);
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_TRUE(m.IsCompleted());
  m.FillMask(&words);
  EXPECT_EQ(AllowedIds(words), std::vector<int32_t>{kEos});  // nothing after the root
  // Back to the start: the first mask again.
  m.Rollback(m.num_accepted());
  GrammarMatcher fresh(CompileOk(GrammarConstraint::JsonSchema(kPersonSchema)));
  std::vector<uint32_t> fresh_words;
  fresh.FillMask(&fresh_words);
  m.FillMask(&words);
  EXPECT_EQ(words, fresh_words);
}

TEST_F(GrammarTest, RollbackPastHistoryDies) {
  GrammarMatcher m(CompileOk(GrammarConstraint::JsonSchema(kPersonSchema)));
  ASSERT_TRUE(m.Accept(kLBrace));
  EXPECT_DEATH(m.Rollback(2), "rolling back more tokens");
}

TEST_F(GrammarTest, RegexEbnfAndJsonObjectCompileAndMatch) {
  {
    GrammarMatcher m(CompileOk(GrammarConstraint::Regex("[0-9]+")));
    EXPECT_FALSE(m.Accept(kX));
    WalkToTermination(m, {kOne, kTwo, kOne, kEos});
  }
  {
    GrammarMatcher m(CompileOk(GrammarConstraint::Ebnf(R"(root ::= "Bob" | "bob")")));
    EXPECT_FALSE(m.Accept(kO));
    WalkToTermination(m, {kB, kO, kB, kEos});
  }
  {
    GrammarMatcher m(CompileOk(GrammarConstraint::JsonObject()));
    WalkToTermination(m, {kLBrace, kQuote, kX, kQuote, kColon, kOne, kRBrace, kEos});
  }
}

TEST_F(GrammarTest, BadConstraintsAreInvalidArgument) {
  const GrammarConstraint bad[] = {
      GrammarConstraint::JsonSchema(R"({"type": )"),                   // not JSON
      GrammarConstraint::JsonSchema(R"({"type": "no-such-type"})"),   // not a schema
      GrammarConstraint::Regex("(ab"),                                 // unbalanced
      GrammarConstraint::Regex("[a-"),                                 // unterminated class
      GrammarConstraint::Ebnf("root ::= missing_rule"),                // undefined rule
      GrammarConstraint::Ebnf("root ::= (\"a\""),                      // unbalanced
      GrammarConstraint::Ebnf("start ::= \"a\""),                      // no root rule
      GrammarConstraint::StructuralTag("{\"type\": \"nonsense\"}"),  // unknown format
      GrammarConstraint::StructuralTag("not json"),
      {GrammarKind::kJsonObject, "{}"},  // json_object takes no text
  };
  for (const GrammarConstraint& c : bad) {
    auto g = compiler_->Compile(c);
    ASSERT_FALSE(g.ok()) << GrammarKindName(c.kind) << ": " << c.text;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
    EXPECT_FALSE(g.status().message().empty());
    // XGrammar's message, without its build paths and CHECK text.
    EXPECT_EQ(g.status().message().find(".cc:"), absl::string_view::npos) << g.status();
    EXPECT_EQ(g.status().message().find("Check failed"), absl::string_view::npos) << g.status();
  }
  EXPECT_EQ(compiler_->Compile(GrammarConstraint::Regex("(ab")).status().message(),
            "invalid regex: Regex parsing error at position 4: The parenthesis is not closed.");
  EXPECT_EQ(compiler_->Compile(GrammarConstraint::Ebnf("root ::= missing_rule")).status().message(),
            "invalid ebnf: EBNF parser error at line 1, column 10: Rule \"missing_rule\" is not "
            "defined");
  // The compiler is still usable afterwards.
  EXPECT_NE(CompileOk(GrammarConstraint::Regex("x+")), nullptr);
}

TEST_F(GrammarTest, OversizeTextIsRefused) {
  std::string big(GrammarCompiler::kMaxConstraintBytes + 1, 'x');
  auto g = compiler_->Compile(GrammarConstraint::Regex(big));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(compiler_->cache_stats().misses, 0);  // refused before compiling
}

TEST_F(GrammarTest, CacheReturnsSameCompiledObject) {
  auto a = CompileOk(GrammarConstraint::JsonSchema(kPersonSchema));
  auto b = CompileOk(GrammarConstraint::JsonSchema(kPersonSchema));
  auto c = CompileOk(GrammarConstraint::Regex("[0-9]+"));
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), c.get());
  EXPECT_GT(a->memory_bytes(), 0u);
  const GrammarCompiler::CacheStats s = compiler_->cache_stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 2);
  EXPECT_EQ(s.entries, 2);
  EXPECT_EQ(static_cast<size_t>(s.bytes), a->memory_bytes() + c->memory_bytes());
}

TEST_F(GrammarTest, CacheEvictsLeastRecentlyUsed) {
  GrammarCompiler::Options options;
  options.cache_max_entries = 2;
  auto compiler = GrammarCompiler::Create(TestVocab(), options);
  ASSERT_TRUE(compiler.ok());
  auto compile = [&](const std::string& re) {
    auto g = (*compiler)->Compile(GrammarConstraint::Regex(re));
    EXPECT_TRUE(g.ok()) << g.status();
    return *g;
  };
  auto a = compile("a+");
  auto b = compile("b+");
  EXPECT_EQ(compile("a+").get(), a.get());  // a is now the most recent
  compile("x+");                             // evicts b
  EXPECT_EQ(compile("a+").get(), a.get());
  EXPECT_NE(compile("b+").get(), b.get());  // recompiled
  EXPECT_EQ((*compiler)->cache_stats().entries, 2);
}

TEST_F(GrammarTest, MatcherOutlivesCompilerAndCache) {
  std::shared_ptr<const CompiledGrammar> g = CompileOk(GrammarConstraint::Regex("[0-9]+"));
  compiler_.reset();
  GrammarMatcher m(std::move(g));
  WalkToTermination(m, {kTwo, kEos});
}

TEST(GrammarCompilerCreateTest, RejectsInconsistentVocab) {
  GrammarVocab v = TestVocab();
  v.stop_token_ids.clear();
  EXPECT_EQ(GrammarCompiler::Create(v).status().code(), absl::StatusCode::kInvalidArgument);
  v = TestVocab();
  v.vocab_size = kNumTokens - 1;
  EXPECT_EQ(GrammarCompiler::Create(v).status().code(), absl::StatusCode::kInvalidArgument);
  v = TestVocab();
  v.stop_token_ids = {kNumTokens};  // a padding id
  EXPECT_EQ(GrammarCompiler::Create(v).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GrammarConstraintTest, HashIsStableAndDistinguishesKind) {
  // FNV-1a 64 of 0x01 followed by the text: must never change (P and D and
  // caches across versions rely on it).
  EXPECT_EQ(GrammarConstraint::JsonSchema(R"({"type":"string"})").Hash(), 0x2a32a33a82d7ae59ull);
  EXPECT_NE(GrammarConstraint::Regex("a").Hash(), GrammarConstraint::Ebnf("a").Hash());
  EXPECT_EQ(GrammarConstraint::Regex("a"), GrammarConstraint::Regex("a"));
  EXPECT_NE(GrammarConstraint::Regex("a"), GrammarConstraint::Ebnf("a"));
}

TEST(ApplyMaskTest, SetsMinusInfinityExactlyWhereBitsAreClear) {
  for (int n : {1, 31, 32, 33, 40, 64, 100, 262144 + 7}) {
    std::vector<uint32_t> words(GrammarMatcher::MaskWords(n));
    for (size_t w = 0; w < words.size(); ++w) {
      // All-ones, all-zeros and mixed words.
      words[w] = w % 3 == 0 ? ~0u : w % 3 == 1 ? 0u : 0x9e3779b9u * static_cast<uint32_t>(w + 1);
    }
    std::vector<float> logits(n + 1);
    for (int i = 0; i <= n; ++i) logits[i] = static_cast<float>(i) * 0.5f - 3.0f;
    ApplyMask(words, logits.data(), n);
    for (int i = 0; i < n; ++i) {
      const bool allowed = (words[i / 32] >> (i % 32)) & 1u;
      if (allowed) {
        EXPECT_EQ(logits[i], static_cast<float>(i) * 0.5f - 3.0f) << "n=" << n << " i=" << i;
      } else {
        EXPECT_TRUE(std::isinf(logits[i]) && logits[i] < 0) << "n=" << n << " i=" << i;
      }
    }
    EXPECT_EQ(logits[n], static_cast<float>(n) * 0.5f - 3.0f);  // past n: untouched
  }
}

TEST(ApplyMaskTest, ShortMaskDies) {
  std::vector<uint32_t> words(1, ~0u);
  std::vector<float> logits(33);
  EXPECT_DEATH(ApplyMask(words, logits.data(), 33), "mask shorter");
}

}  // namespace
}  // namespace pdserve
