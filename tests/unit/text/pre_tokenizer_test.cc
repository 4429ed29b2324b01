#include "common/text/pre_tokenizer.h"

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdserve {
namespace {

using ::testing::ElementsAreArray;

std::vector<std::string> Split(PreTokenizerType type, std::string_view text) {
  std::vector<std::string_view> pieces;
  PreTokenizer(type).Split(text, &pieces);
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

struct Case {
  const char* name;
  PreTokenizerType type;
  std::string text;
  std::vector<std::string> pieces;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class PreTokenizerCaseTest : public ::testing::TestWithParam<Case> {};

TEST_P(PreTokenizerCaseTest, Splits) {
  EXPECT_THAT(Split(GetParam().type, GetParam().text), ElementsAreArray(GetParam().pieces));
}

constexpr PreTokenizerType kSmol = PreTokenizerType::kSmollm;
constexpr PreTokenizerType kGpt2 = PreTokenizerType::kGpt2;
constexpr PreTokenizerType kLlama3 = PreTokenizerType::kLlama3;
constexpr PreTokenizerType kDefault = PreTokenizerType::kDefault;

// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Cases, PreTokenizerCaseTest,
    ::testing::Values(
        Case{"Empty", kSmol, "", {}},
        Case{"Words", kSmol, "Hello world", {"Hello", " world"}},
        Case{"DigitsSplitEach", kSmol, "Hello world! 123",
             {"Hello", " world", "!", " ", "1", "2", "3"}},
        Case{"Gpt2KeepsNumberRuns", kGpt2, "abc 123", {"abc", " 123"}},
        Case{"DigitsThenLetters", kSmol, "12abc", {"1", "2", "abc"}},
        Case{"Gpt2DigitsThenLetters", kGpt2, "12abc", {"12", "abc"}},
        Case{"NonAsciiDigits", kSmol, "x\u0663\u0664", {"x", "\u0663", "\u0664"}},
        Case{"SpaceRunLeavesLastSpace", kSmol, "  multiple   spaces",
             {" ", " multiple", "  ", " spaces"}},
        Case{"TrailingSpacesStayTogether", kSmol, "end   ", {"end", "   "}},
        Case{"NewlinesBeforeWord", kSmol, "a\n\nb", {"a", "\n", "\n", "b"}},
        Case{"TabAfterSpaces", kSmol, "x  \ty", {"x", "  ", "\t", "y"}},
        Case{"NbspIsWhitespaceNotSpace", kSmol, "a\u00a0b", {"a", "\u00a0", "b"}},
        Case{"MixedWhitespaceRun", kSmol, "x \u00a0 y", {"x", " \u00a0", " y"}},
        Case{"SpaceJoinsPunctuation", kSmol, "a !!b", {"a", " !!", "b"}},
        Case{"Contractions", kSmol, "I'll we've don't",
             {"I", "'ll", " we", "'ve", " don", "'t"}},
        Case{"ContractionsAreLowercaseOnly", kSmol, "DON'T", {"DON", "'", "T"}},
        Case{"ContractionBeforeLetters", kSmol, "'sx", {"'s", "x"}},
        Case{"LoneApostrophe", kSmol, "'", {"'"}},
        Case{"ApostropheAfterContraction", kSmol, "'re'", {"'re", "'"}},
        Case{"Emoji", kSmol, "I \U0001F600\U0001F600", {"I", " \U0001F600\U0001F600"}},
        Case{"Cjk", kSmol, "\u4f60\u597d \u4e16\u754c", {"\u4f60\u597d", " \u4e16\u754c"}},
        Case{"CombiningMarkIsNotLetter", kSmol, "e\u0301x", {"e", "\u0301", "x"}},
        Case{"InvalidBytesAreOther", kSmol, "a\377\376b", {"a", "\xff\xfe", "b"}},
        Case{"SpaceJoinsInvalidByte", kSmol, " \xff", {" \xff"}},
        Case{"TruncatedSequenceAtEnd", kSmol, "ab\xe2\x82", {"ab", "\xe2\x82"}},
        Case{"LoneLeadByteBeforeLetter", kSmol, "\xc3x", {"\xc3", "x"}},
        // LLaMA 3: contractions in any case, one non-letter joins letters,
        // digits in threes, punctuation keeps trailing newlines, whitespace
        // before newlines goes with them.
        Case{"Llama3ContractionsAnyCase", kLlama3, "DON'T we'Re", {"DON", "'T", " we", "'Re"}},
        Case{"Llama3PunctuationJoinsLetters", kLlama3, "(hello)", {"(hello", ")"}},
        Case{"Llama3TabJoinsLetters", kLlama3, "a\tb", {"a", "\tb"}},
        Case{"Llama3NewlineDoesNotJoin", kLlama3, "a\nb", {"a", "\n", "b"}},
        Case{"Llama3DigitsInThrees", kLlama3, "1234567", {"123", "456", "7"}},
        Case{"Llama3SpaceDoesNotJoinDigits", kLlama3, "x 12", {"x", " ", "12"}},
        Case{"Llama3PunctuationTakesNewlines", kLlama3, "!!\n\nx", {"!!\n\n", "x"}},
        Case{"Llama3SpacesBeforeNewline", kLlama3, "a  \n b", {"a", "  \n", " b"}},
        Case{"Llama3SpaceRunGivesUpLast", kLlama3, "a   b", {"a", "  ", " b"}},
        Case{"Llama3TrailingSpaces", kLlama3, "a   ", {"a", "   "}},
        // llama.cpp's "default": punctuation runs first, so a space never
        // joins them; numbers lose their space and split in threes.
        Case{"DefaultPunctuationStandsAlone", kDefault, "say (hi), ok?!",
             {"say", " ", "(", "hi", "),", " ok", "?!"}},
        Case{"DefaultSymbolsJoinPunctuationNotBacktick", kDefault, "a $+<=>^~| `b`",
             {"a", " ", "$+<=>^~|", " `", "b", "`"}},
        Case{"DefaultNonAsciiPunctuationNotSymbols", kDefault, "«x» €5",
             {"«", "x", "»", " €", "5"}},
        Case{"DefaultDigitGroupsOfThree", kDefault, "n 1234567 12",
             {"n", " ", "123", "456", "7", " ", "12"}},
        Case{"DefaultNonAsciiNumbersAreNotDigits", kDefault, "١٢٣34567",
             {"١٢٣", "345", "67"}},
        Case{"DefaultSpaceRunBeforePunctuation", kDefault, "a   (b)",
             {"a", "   ", "(", "b", ")"}}));
// clang-format on

TEST(PreTokenizerTypeTest, NamesMapLikeLlamaCpp) {
  EXPECT_EQ(PreTokenizerTypeFromName("smollm"), PreTokenizerType::kSmollm);
  EXPECT_EQ(PreTokenizerTypeFromName("starcoder"), PreTokenizerType::kSmollm);
  EXPECT_EQ(PreTokenizerTypeFromName("gpt2"), PreTokenizerType::kGpt2);
  EXPECT_EQ(PreTokenizerTypeFromName("gpt-2"), PreTokenizerType::kGpt2);
  EXPECT_EQ(PreTokenizerTypeFromName("default"), PreTokenizerType::kDefault);
  EXPECT_EQ(PreTokenizerTypeFromName("llama-bpe"), PreTokenizerType::kLlama3);
  EXPECT_EQ(PreTokenizerTypeFromName("llama3"), PreTokenizerType::kLlama3);
  EXPECT_EQ(PreTokenizerTypeFromName("no-such-pre"), PreTokenizerType::kGpt2);
  EXPECT_EQ(FindPreTokenizerType("no-such-pre"), std::nullopt);
}

// Any byte string, valid UTF-8 or not, splits into non-empty pieces that
// concatenate back to the input.
TEST(PreTokenizerTest, PiecesAlwaysCoverInputExactly) {
  std::mt19937 rng(42);
  const std::string alphabet[] = {"a",
                                  "Z",
                                  "7",
                                  " ",
                                  "  ",
                                  "\n",
                                  "\t",
                                  "'",
                                  "'s",
                                  "!",
                                  "\xc3\xa9",
                                  "\xe4\xb8\xad",
                                  "\xf0\x9f\x98\x80",
                                  "\xff",
                                  "\xc3",
                                  "\xe2\x82",
                                  "\x80",
                                  "\xc2\xa0",
                                  "\xd9\xa3"};
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text;
    const int n = static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % std::size(alphabet)];
    for (const PreTokenizerType type : {kSmol, kGpt2, kLlama3}) {
      std::vector<std::string_view> pieces;
      PreTokenizer(type).Split(text, &pieces);
      std::string joined;
      for (const std::string_view p : pieces) {
        ASSERT_FALSE(p.empty());
        joined += p;
      }
      ASSERT_EQ(joined, text);
    }
  }
}

}  // namespace
}  // namespace pdserve
