#include "common/text/tokenizer.h"

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/golden/test_model.h"
#include "tests/testing/tokenizer_test_util.h"

namespace pdserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tokenizer_test::AddToken;
using tokenizer_test::ByteVocab;
using tokenizer_test::Spell;

std::unique_ptr<Tokenizer> Build(const TokenizerVocab& v) {
  auto t = Tokenizer::FromVocab(v);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

int32_t Id(const Tokenizer& t, std::string_view raw) {
  for (int32_t id = 0; id < t.vocab_size(); ++id) {
    if (t.TokenText(id) == Spell(raw)) return id;
  }
  return -1;
}

// A SentencePiece ("llama") vocabulary: <unk>, <s>, </s>, the 256 byte
// tokens, U+2581 and a..c, then `pieces` with their scores.
TokenizerVocab SpmVocab(const std::vector<std::pair<std::string, float>>& pieces,
                        bool add_space_prefix = true) {
  TokenizerVocab v;
  v.model = "llama";
  auto add = [&v](std::string text, TokenType type, float score) {
    v.tokens.push_back(std::move(text));
    v.token_types.push_back(static_cast<int32_t>(type));
    v.scores.push_back(score);
  };
  add("<unk>", TokenType::kUnknown, 0.0f);
  add("<s>", TokenType::kControl, 0.0f);
  add("</s>", TokenType::kControl, 0.0f);
  for (int b = 0; b < 256; ++b) add(absl::StrFormat("<0x%02X>", b), TokenType::kByte, 0.0f);
  for (const char* c : {"\u2581", "a", "b", "c"}) add(c, TokenType::kNormal, -10.0f);
  for (const auto& [text, score] : pieces) add(text, TokenType::kNormal, score);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_bos = true;
  v.add_space_prefix = add_space_prefix;
  return v;
}

std::vector<int32_t> Ids(const Tokenizer& t, const std::vector<std::string>& texts) {
  std::vector<int32_t> ids;
  for (const std::string& text : texts) {
    int32_t found = -1;
    for (int32_t id = 0; id < t.vocab_size() && found < 0; ++id) {
      if (t.TokenText(id) == text) found = id;
    }
    EXPECT_GE(found, 0) << text;
    ids.push_back(found);
  }
  return ids;
}

TEST(TokenizerTest, SingleBytesWithoutMerges) {
  auto t = Build(ByteVocab());
  EXPECT_THAT(t->Encode("ab", false), ElementsAre('a', 'b'));
  EXPECT_TRUE(t->Encode("", false).empty());
}

TEST(TokenizerTest, LowestRankMergesFirstWherever) {
  auto t = Build(ByteVocab({{"b", "c"}, {"a", "b"}, {"a", "bc"}}));
  EXPECT_THAT(t->Encode("abc", false), ElementsAre(Id(*t, "abc")));
  auto partial = Build(ByteVocab({{"b", "c"}, {"a", "b"}}));
  EXPECT_THAT(partial->Encode("abc", false), ElementsAre('a', Id(*partial, "bc")));
}

TEST(TokenizerTest, EqualRanksMergeLeftmostFirst) {
  auto t = Build(ByteVocab({{"a", "a"}}));
  EXPECT_THAT(t->Encode("aaa", false), ElementsAre(Id(*t, "aa"), 'a'));
  EXPECT_THAT(t->Encode("aaaa", false), ElementsAre(Id(*t, "aa"), Id(*t, "aa")));
}

TEST(TokenizerTest, MergesNeverCrossPreTokenizerPieces) {
  auto t = Build(ByteVocab({{"o", " "}, {" ", "w"}}));
  EXPECT_THAT(t->Encode("o w", false), ElementsAre('o', Id(*t, " w")));
}

TEST(TokenizerTest, ByteWithoutTokenFallsBackLikeLlamaCpp) {
  TokenizerVocab v = ByteVocab();
  v.tokens[4] = "<unused4>";  // the byte 0x04 ("Ą" = C4 84) has no token now
  v.token_types[4] = static_cast<int32_t>(TokenType::kUnused);
  auto dropped = Build(v);
  EXPECT_THAT(dropped->Encode("a\004b", false), ElementsAre('a', 'b'));
  // llama.cpp then looks up each byte of the symbol's UTF-8 as a token.
  const int32_t c4 = AddToken(&v, "\xc4");
  auto fallback = Build(v);
  EXPECT_THAT(fallback->Encode("\x04", false), ElementsAre(c4));
}

TEST(TokenizerTest, IllFormedUtf8RoundTrips) {
  auto t = Build(ByteVocab({{"a", "b"}}));
  std::mt19937 rng(7);
  for (int iter = 0; iter < 500; ++iter) {
    std::string bytes(rng() % 20, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 256);
    EXPECT_EQ(t->Decode(t->Encode(bytes, true)), bytes);
  }
}

TokenizerVocab ChatVocab() {
  TokenizerVocab v = ByteVocab({{"h", "i"}});
  AddToken(&v, "<|endoftext|>", TokenType::kControl);
  AddToken(&v, "<|im_start|>", TokenType::kControl);
  AddToken(&v, "<|im_end|>", TokenType::kControl);
  v.eos_id = AddToken(&v, "</s>", TokenType::kControl);
  v.bos_id = v.eos_id;
  return v;
}

TEST(TokenizerTest, ControlTokensOnlyWithParseSpecial) {
  auto t = Build(ChatVocab());
  const int32_t start = 258, end = 259, hi = 256;
  EXPECT_THAT(t->Encode("<|im_start|>hi<|im_end|>", true), ElementsAre(start, hi, end));
  const std::vector<int32_t> plain = t->Encode("<|im_start|>hi", false);
  EXPECT_EQ(plain.size(), std::string("<|im_start|>").size() + 1);
  EXPECT_EQ(plain.back(), hi);
}

TEST(TokenizerTest, UserDefinedTokensAlwaysSplitOut) {
  TokenizerVocab v = ByteVocab();
  const int32_t tool = AddToken(&v, "<tool>", TokenType::kUserDefined);
  auto t = Build(v);
  EXPECT_THAT(t->Encode("a<tool>b", false), ElementsAre('a', tool, 'b'));
  EXPECT_EQ(t->TokenBytes(tool), "<tool>");
}

TEST(TokenizerTest, LongestSpecialTokenWins) {
  TokenizerVocab v = ByteVocab();
  const int32_t shorter = AddToken(&v, "<x>", TokenType::kControl);
  const int32_t longer = AddToken(&v, "<x><y>", TokenType::kControl);
  auto t = Build(v);
  EXPECT_THAT(t->Encode("<x><y><x>", true), ElementsAre(longer, shorter));
}

TEST(TokenizerTest, TokenBytesAndDecode) {
  auto t = Build(ChatVocab());
  EXPECT_EQ(t->TokenBytes(' '), " ");
  EXPECT_EQ(t->TokenText(' '), "\xc4\xa0");  // "Ġ"
  EXPECT_EQ(t->TokenBytes(259), "");
  EXPECT_EQ(t->TokenBytes(259, /*render_special=*/true), "<|im_end|>");
  EXPECT_EQ(t->TokenBytes(-1), "");
  EXPECT_EQ(t->TokenBytes(t->vocab_size()), "");
  EXPECT_EQ(t->Decode({258, 256, 259}), "hi");
  EXPECT_EQ(t->Decode({258, 256, 259}, true), "<|im_start|>hi<|im_end|>");
}

TEST(TokenizerTest, EndOfGenerationSet) {
  TokenizerVocab v = ChatVocab();
  const int32_t eot = AddToken(&v, "<|eot_id|>", TokenType::kNormal);
  auto t = Build(v);
  EXPECT_THAT(t->eog_ids(), ElementsAre(257, 259, 260, eot));
  EXPECT_TRUE(t->IsEog(259));
  EXPECT_FALSE(t->IsEog(258));
  // A NORMAL-typed end token is treated as CONTROL, like llama.cpp does.
  EXPECT_EQ(t->GetTokenType(eot), TokenType::kControl);
  EXPECT_EQ(t->TokenBytes(eot), "");
}

TEST(TokenizerTest, UnknownPreTokenizerFallsBackToGpt2) {
  TokenizerVocab v = ByteVocab();
  v.pre = "brand-new-pre";
  EXPECT_EQ(Build(v)->pre_tokenizer_type(), PreTokenizerType::kGpt2);
}

absl::Status BuildStatus(const TokenizerVocab& v) { return Tokenizer::FromVocab(v).status(); }

TEST(TokenizerTest, RejectsMalformedVocabularies) {
  TokenizerVocab empty;
  EXPECT_EQ(BuildStatus(empty).code(), absl::StatusCode::kInvalidArgument);
  TokenizerVocab types = ByteVocab();
  types.token_types.pop_back();
  EXPECT_THAT(BuildStatus(types).message(), HasSubstr("token_type"));
  TokenizerVocab no_space = ByteVocab();
  no_space.merges.push_back("ab");
  EXPECT_THAT(BuildStatus(no_space).message(), HasSubstr("merges[0]"));
  TokenizerVocab unknown_part = ByteVocab();
  unknown_part.merges.push_back("xyz a");
  EXPECT_THAT(BuildStatus(unknown_part).message(), HasSubstr("not a token"));
  TokenizerVocab unknown_result = ByteVocab();
  unknown_result.merges.push_back("a b");  // "ab" is not a token
  EXPECT_THAT(BuildStatus(unknown_result).message(), HasSubstr("not a token"));
  TokenizerVocab bad_eos = ByteVocab();
  bad_eos.eos_id = 256;
  EXPECT_THAT(BuildStatus(bad_eos).message(), HasSubstr("eos_token_id"));
  TokenizerVocab wpm = ByteVocab();
  wpm.model = "bert";
  EXPECT_EQ(BuildStatus(wpm).code(), absl::StatusCode::kUnimplemented);
  TokenizerVocab short_scores = SpmVocab({{"ab", 0.0f}});
  short_scores.scores.pop_back();
  EXPECT_THAT(BuildStatus(short_scores).message(), HasSubstr("scores"));
}

TEST(SpmTokenizerTest, HighestScoreMergesFirst) {
  auto t = Build(SpmVocab({{"ab", -1.0f}, {"bc", -0.5f}}, /*add_space_prefix=*/false));
  EXPECT_EQ(t->Encode("abc", false), Ids(*t, {"a", "bc"}));
  auto whole = Build(SpmVocab({{"ab", -1.0f}, {"bc", -0.5f}, {"abc", -2.0f}}, false));
  EXPECT_EQ(whole->Encode("abc", false), Ids(*whole, {"abc"}));
}

TEST(SpmTokenizerTest, EqualScoresMergeLeftmostFirst) {
  auto t = Build(SpmVocab({{"aa", 0.0f}}, false));
  EXPECT_EQ(t->Encode("aaa", false), Ids(*t, {"aa", "a"}));
}

TEST(SpmTokenizerTest, SpacesBecomeU2581AndStartsGetOne) {
  auto t = Build(SpmVocab({{"\u2581a", 0.0f}, {"\u2581b", 0.0f}}));
  EXPECT_EQ(t->Encode("a b", false), Ids(*t, {"\u2581a", "\u2581b"}));
  // A special token counts as a start, so the text after it gets a space.
  EXPECT_EQ(t->Encode("<s>a", true), Ids(*t, {"<s>", "\u2581a"}));
  auto no_prefix = Build(SpmVocab({{"\u2581a", 0.0f}}, false));
  EXPECT_EQ(no_prefix->Encode("a a", false), Ids(*no_prefix, {"a", "\u2581a"}));
}

TEST(SpmTokenizerTest, UnknownCharactersFallBackToBytesThenUnk) {
  auto t = Build(SpmVocab({}, false));
  EXPECT_EQ(t->Encode("\u00e9", false), Ids(*t, {"<0xC3>", "<0xA9>"}));
  TokenizerVocab no_bytes = SpmVocab({}, false);
  for (std::string& token : no_bytes.tokens) {
    if (token.rfind("<0x", 0) == 0) token = "unused" + token;
  }
  auto u = Build(no_bytes);
  EXPECT_EQ(u->Encode("\u00e9a", false), Ids(*u, {"<unk>", "<unk>", "a"}));
}

TEST(SpmTokenizerTest, DecodeUnescapesSpacesAndBytes) {
  auto t = Build(SpmVocab({{"\u2581a", 0.0f}}));
  const std::vector<int32_t> ids = t->Encode("a \u00e9", false);
  EXPECT_EQ(t->Decode(ids), " a \u00e9");
  EXPECT_EQ(t->TokenBytes(Ids(*t, {"<0x41>"})[0]), "A");
  EXPECT_EQ(t->TokenBytes(t->bos_id()), "");
  EXPECT_EQ(t->TokenBytes(t->bos_id(), /*render_special=*/true), "<s>");
}

// `extra` adds or overrides keys after the defaults below.
std::string VocabGguf(const TokenizerVocab& v, bool with_merges = true,
                      const std::function<void(GgufWriter&)>& extra = nullptr,
                      bool with_types = true, bool with_add_bos = true) {
  GgufWriter w;
  w.AddString("tokenizer.ggml.model", v.model);
  w.AddString("tokenizer.ggml.pre", v.pre);
  w.AddStringArray("tokenizer.ggml.tokens", v.tokens);
  if (with_types) w.AddInt32Array("tokenizer.ggml.token_type", v.token_types);
  if (with_merges) w.AddStringArray("tokenizer.ggml.merges", v.merges);
  w.AddUint32("tokenizer.ggml.eos_token_id", 259);
  if (with_add_bos) w.AddBool("tokenizer.ggml.add_bos_token", true);
  if (extra) extra(w);
  return w.Serialize();
}

std::unique_ptr<Tokenizer> FromGgufOk(const std::string& bytes) {
  auto gguf = GgufFile::FromBuffer(bytes);
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  if (!gguf.ok()) return nullptr;
  auto t = Tokenizer::FromGguf(**gguf);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(TokenizerTest, EncodePromptAddsBosAndEosAsAsked) {
  auto t = FromGgufOk(VocabGguf(ChatVocab(), true, [](GgufWriter& w) {
    w.AddUint32("tokenizer.ggml.bos_token_id", 258);
    w.AddBool("tokenizer.ggml.add_eos_token", true);
  }));
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->add_eos());
  EXPECT_THAT(t->EncodePrompt("hi"), ElementsAre(258, 256, 259));
  auto plain = FromGgufOk(VocabGguf(ChatVocab(), true, nullptr, true, /*with_add_bos=*/false));
  ASSERT_NE(plain, nullptr);
  EXPECT_THAT(plain->EncodePrompt("hi"), ElementsAre(256));
}

TEST(TokenizerTest, Llama3PreTokenizersDefaultToBosButNotSmaug) {
  for (const auto& [pre, bos] : std::vector<std::pair<std::string, bool>>{
           {"llama-bpe", true}, {"llama3", true}, {"smaug-bpe", false}, {"dbrx", false}}) {
    TokenizerVocab v = ChatVocab();
    v.pre = pre;
    auto t = FromGgufOk(VocabGguf(v, true, nullptr, true, /*with_add_bos=*/false));
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->add_bos(), bos) << pre;
    EXPECT_EQ(t->pre_tokenizer_type(), PreTokenizerType::kLlama3) << pre;
  }
}

TEST(TokenizerTest, MissingTokenTypesMeanNormal) {
  auto t = FromGgufOk(VocabGguf(ChatVocab(), true, nullptr, /*with_types=*/false));
  ASSERT_NE(t, nullptr);
  // (End-of-generation texts are still retyped CONTROL, as llama.cpp does.)
  EXPECT_EQ(t->GetTokenType(258), TokenType::kNormal);  // <|im_start|>, CONTROL in ChatVocab
  for (int32_t id = 0; id <= 256; ++id) EXPECT_EQ(t->GetTokenType(id), TokenType::kNormal) << id;
}

TEST(TokenizerTest, FromGgufReadsMetadata) {
  auto gguf = GgufFile::FromBuffer(VocabGguf(ChatVocab()));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto t = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 261);
  EXPECT_EQ((*t)->eos_id(), 259);
  EXPECT_EQ((*t)->bos_id(), -1);
  EXPECT_TRUE((*t)->add_bos());
  EXPECT_EQ((*t)->pre_tokenizer_type(), PreTokenizerType::kSmollm);
  EXPECT_THAT((*t)->Encode("hi", false), ElementsAre(256));
}

TEST(TokenizerTest, FromGgufNamesMissingKey) {
  auto gguf = GgufFile::FromBuffer(VocabGguf(ChatVocab(), /*with_merges=*/false));
  ASSERT_TRUE(gguf.ok());
  const absl::Status s = Tokenizer::FromGguf(**gguf).status();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("tokenizer.ggml.merges"));
}

TEST(TokenizerTest, ConcurrentEncodesAgree) {
  auto t = Build(ByteVocab({{"a", "b"}, {"ab", "c"}, {" ", "a"}}));
  const std::string text = "abc ab abcabc a b c 123 abcc";
  const std::vector<int32_t> expected = t->Encode(text, true);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 500; ++k) mismatches[i] += t->Encode(text, true) != expected;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

// --- The real SmolLM2 vocabulary --------------------------------------------

class RealTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = testing::RealModelPath();
    if (path.empty()) return;
    auto gguf = GgufFile::Open(path);
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    auto t = Tokenizer::FromGguf(**gguf);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = t->release();
  }
  static void TearDownTestSuite() { delete tokenizer_; }
  void SetUp() override {
    if (tokenizer_ == nullptr) GTEST_SKIP() << "SmolLM2 model not found";
  }
  static const Tokenizer* tokenizer_;
};

const Tokenizer* RealTokenizerTest::tokenizer_ = nullptr;

TEST_F(RealTokenizerTest, Metadata) {
  EXPECT_EQ(tokenizer_->vocab_size(), 49152);
  EXPECT_EQ(tokenizer_->bos_id(), 1);
  EXPECT_EQ(tokenizer_->eos_id(), 2);
  EXPECT_FALSE(tokenizer_->add_bos());
  EXPECT_EQ(tokenizer_->pre_tokenizer_type(), PreTokenizerType::kSmollm);
  // <|endoftext|>, <|im_end|> and the FIM repository marker <reponame>, as
  // llama.cpp 0.3.36 lists them.
  EXPECT_THAT(tokenizer_->eog_ids(), ElementsAre(0, 2, 4));
  EXPECT_EQ(tokenizer_->TokenText(1), "<|im_start|>");
  EXPECT_EQ(tokenizer_->TokenText(4), "<reponame>");
}

TEST_F(RealTokenizerTest, ReferenceSelfCheckVectors) {
  const Tokenizer& t = *tokenizer_;
  EXPECT_THAT(t.Encode("Hello, we can use", false), ElementsAre(19556, 28, 392, 416, 722));
  EXPECT_THAT(t.Encode("The capital of France is", false), ElementsAre(504, 3575, 282, 4649, 314));
  EXPECT_THAT(t.Encode("\n", false), ElementsAre(198));
  EXPECT_THAT(t.Encode("Hello world! 123", false), ElementsAre(19556, 905, 17, 216, 33, 34, 35));
  EXPECT_THAT(t.Encode("  multiple   spaces", false), ElementsAre(216, 2701, 256, 5600));
  EXPECT_THAT(t.Encode("Caf\u00e9 d\u00e9j\u00e0 vu.", false),
              ElementsAre(51, 1939, 2756, 32564, 90, 16739, 386, 101, 30));
  EXPECT_THAT(
      t.Encode("You are a helpful AI assistant named SmolLM, trained by Hugging Face", false),
      ElementsAre(2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407,
                  19712, 8182));
  EXPECT_THAT(t.Encode("<|im_start|>user\nhi<|im_end|>", true), ElementsAre(1, 4093, 198, 6004, 2));
}

TEST_F(RealTokenizerTest, BytesWithoutTokensAreDroppedLikeLlamaCpp) {
  EXPECT_THAT(tokenizer_->Encode("a\004b", false), ElementsAre(81, 82));
}

TEST_F(RealTokenizerTest, DecodeInvertsEncode) {
  // Random mixtures of scripts, digits, spaces and specials; avoids the few
  // control bytes the vocabulary has no token for.
  const std::string_view alphabet[] = {"a",
                                       "Z",
                                       "the",
                                       " ",
                                       "  ",
                                       "\n",
                                       "\t",
                                       "\r\n",
                                       "'s",
                                       "'ll",
                                       "!",
                                       "?",
                                       "0",
                                       "42",
                                       ".",
                                       "\xc3\xa9",
                                       "\xc3\x9f",
                                       "\xd0\x96",
                                       "\xe4\xb8\xad",
                                       "\xe6\x96\x87",
                                       "\xed\x95\x9c",
                                       "\xd8\xa8",
                                       "\xf0\x9f\x98\x80",
                                       "\xf0\x9f\x87\xba\xf0\x9f\x87\xb8",
                                       "\xe2\x80\x8d",
                                       "\xc2\xa0",
                                       "\xe3\x80\x80",
                                       "<|im_start|>",
                                       "<|im_end|>",
                                       std::string_view("\0", 1),
                                       "\x7f",
                                       "{",
                                       "}"};
  std::mt19937 rng(1);
  for (int iter = 0; iter < 1000; ++iter) {
    std::string text;
    for (int i = static_cast<int>(rng() % 40); i > 0; --i)
      text += alphabet[rng() % std::size(alphabet)];
    EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode(text, false)), text);
    EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode(text, true), true), text);
  }
}

}  // namespace
}  // namespace pdserve
