// Structured output on the three real models' vocabularies (GPT-2 byte-level
// BPE: SmolLM2 and Qwen2.5; SentencePiece with byte fallback: Gemma 3): the
// vocabulary bridge gives special tokens no text, a JSON document with
// multi-byte characters walks to termination token by token as the
// model's own tokenizer cuts it, byte-fallback tokens spell a character
// the vocabulary lacks, and inside a JSON string no special token is ever
// allowed while ordinary and multi-byte tokens are.
#include <memory>
#include <string>
#include <vector>

#include "common/grammar/grammar_compiler.h"
#include "common/grammar/grammar_matcher.h"
#include "common/grammar/tokenizer_vocab.h"
#include "common/model/model_card.h"
#include "gtest/gtest.h"
#include "tests/golden/test_model.h"

namespace pdserve {
namespace {

constexpr char kSchema[] =
    R"({"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]})";

class ModelVocabGrammarTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    auto card = ModelCard::Load(testing::RealModelPath(GetParam()));
    if (!card.ok()) GTEST_SKIP() << GetParam() << " not found (scripts/fetch-model.sh)";
    card_ = std::move(*card);
    auto compiler = NewGrammarCompiler(tokenizer(), card_->config().n_vocab);
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    compiler_ = std::move(*compiler);
    auto grammar = compiler_->Compile(GrammarConstraint::JsonSchema(kSchema));
    ASSERT_TRUE(grammar.ok()) << grammar.status();
    grammar_ = *grammar;
  }
  const Tokenizer& tokenizer() const { return card_->tokenizer(); }

  // Accepts the tokens `text` encodes to, one by one.
  bool AcceptText(GrammarMatcher& m, const std::string& text) {
    for (int32_t id : tokenizer().Encode(text, /*parse_special=*/false)) {
      if (!m.Accept(id)) return false;
    }
    return true;
  }

  std::unique_ptr<ModelCard> card_;
  std::unique_ptr<GrammarCompiler> compiler_;
  std::shared_ptr<const CompiledGrammar> grammar_;
};

TEST_P(ModelVocabGrammarTest, SpecialTokensHaveNoText) {
  const GrammarVocab v = VocabFromTokenizer(tokenizer(), card_->config().n_vocab);
  int specials = 0;
  for (int32_t id = 0; id < tokenizer().vocab_size(); ++id) {
    const TokenType type = tokenizer().GetTokenType(id);
    if (type == TokenType::kControl || type == TokenType::kUnknown || type == TokenType::kUnused) {
      EXPECT_EQ(v.token_bytes[id], "") << id << " " << tokenizer().TokenText(id);
      ++specials;
    }
  }
  EXPECT_GT(specials, 0);
  EXPECT_EQ(v.stop_token_ids, tokenizer().eog_ids());
}

TEST_P(ModelVocabGrammarTest, MultiByteDocumentWalksToTheEnd) {
  GrammarMatcher m(grammar_);
  ASSERT_TRUE(AcceptText(m, R"({"s": "héllo, 日本語 — ok 🙂"})"));
  EXPECT_TRUE(m.IsCompleted());
  EXPECT_TRUE(m.Accept(tokenizer().eog_ids().front()));
  EXPECT_TRUE(m.IsTerminated());
}

TEST_P(ModelVocabGrammarTest, NoSpecialTokenInsideAString) {
  GrammarMatcher m(grammar_);
  ASSERT_TRUE(AcceptText(m, R"({"s": "ab)"));
  std::vector<uint32_t> words;
  ASSERT_TRUE(m.FillMask(&words));
  auto allowed = [&words](int32_t id) { return (words[id / 32] >> (id % 32)) & 1u; };
  int ordinary = 0;
  for (int32_t id = 0; id < tokenizer().vocab_size(); ++id) {
    const TokenType type = tokenizer().GetTokenType(id);
    if (type == TokenType::kControl || type == TokenType::kUnknown || type == TokenType::kUnused) {
      EXPECT_FALSE(allowed(id)) << "special token " << id << " " << tokenizer().TokenText(id);
    } else if (allowed(id)) {
      ++ordinary;
    }
  }
  EXPECT_GT(ordinary, 1000);  // free text inside the string
  // A multi-byte character's token (or the first of its pieces) is allowed.
  const std::vector<int32_t> cjk = tokenizer().Encode("日本", false);
  ASSERT_FALSE(cjk.empty());
  EXPECT_TRUE(allowed(cjk.front()));
  // The end of the answer is not: the object is open.
  EXPECT_FALSE(allowed(tokenizer().eog_ids().front()));
}

TEST_P(ModelVocabGrammarTest, ByteTokensSpellAnyCharacter) {
  GrammarMatcher m(grammar_);
  ASSERT_TRUE(AcceptText(m, R"({"s": ")"));
  // U+10348 (Gothic hwair), written byte by byte where the vocabulary has
  // byte tokens (byte-level BPE: every byte; SentencePiece: <0xNN>).
  const std::string hwair = "\xF0\x90\x8D\x88";
  for (unsigned char byte : hwair) {
    int32_t id = -1;
    for (int32_t t = 0; t < tokenizer().vocab_size() && id < 0; ++t) {
      if (tokenizer().TokenBytes(t) == std::string(1, static_cast<char>(byte))) id = t;
    }
    ASSERT_GE(id, 0) << "no token for byte " << static_cast<int>(byte);
    ASSERT_TRUE(m.Accept(id)) << static_cast<int>(byte);
  }
  ASSERT_TRUE(AcceptText(m, R"("})"));
  EXPECT_TRUE(m.IsCompleted());
}

INSTANTIATE_TEST_SUITE_P(Models, ModelVocabGrammarTest,
                         ::testing::Values("SmolLM2-135M-Instruct.Q4_1.gguf",
                                           "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
                                           "gemma-3-270m.Q4_K_M.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param).substr(0, 5) == "SmolL"  ? "SmolLM2"
                                  : std::string(info.param).substr(0, 4) == "Qwen" ? "Qwen"
                                                                                   : "Gemma";
                         });

}  // namespace
}  // namespace pdserve
