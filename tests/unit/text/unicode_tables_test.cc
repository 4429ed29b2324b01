#include "common/text/unicode_tables.h"

#include <cstdint>
#include <string_view>

#include "gtest/gtest.h"

namespace pdserve {
namespace {

TEST(UnicodeTablesTest, VersionMatchesLlamaCpp) {
  EXPECT_EQ(std::string_view(kUnicodeTablesVersion), "15.1.0");
}

TEST(UnicodeTablesTest, AsciiFastPathAgreesWithTable) {
  for (char32_t cp = 0; cp < 0x80; ++cp) {
    EXPECT_EQ(ClassifyCodepoint(cp), ClassifyCodepointSlow(cp))
        << "U+" << std::hex << static_cast<uint32_t>(cp);
  }
}

struct Case {
  char32_t cp;
  CodepointClass cls;
};

class ClassifyTest : public ::testing::TestWithParam<Case> {};

TEST_P(ClassifyTest, Classifies) {
  EXPECT_EQ(ClassifyCodepoint(GetParam().cp), GetParam().cls)
      << "U+" << std::hex << static_cast<uint32_t>(GetParam().cp);
}

constexpr CodepointClass kL = CodepointClass::kLetter;
constexpr CodepointClass kN = CodepointClass::kNumber;
constexpr CodepointClass kW = CodepointClass::kWhitespace;
constexpr CodepointClass kO = CodepointClass::kOther;

// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Cases, ClassifyTest,
    ::testing::Values(
        Case{'a', kL}, Case{'Z', kL}, Case{'0', kN}, Case{'9', kN}, Case{' ', kW},
        Case{'\t', kW}, Case{'\n', kW}, Case{'\r', kW}, Case{0x0B, kW}, Case{0x0C, kW},
        Case{'\'', kO}, Case{'_', kO}, Case{0x00, kO}, Case{0x7F, kO},
        // Python's isspace() includes the separators U+001C..U+001F; the
        // White_Space property (and so \s in llama.cpp) does not.
        Case{0x1C, kO}, Case{0x1F, kO},
        Case{0x85, kW}, Case{0xA0, kW}, Case{0x1680, kW}, Case{0x2000, kW}, Case{0x200A, kW},
        Case{0x2028, kW}, Case{0x2029, kW}, Case{0x202F, kW}, Case{0x205F, kW},
        Case{0x3000, kW}, Case{0x200B, kO}, Case{0x180E, kO}, Case{0xFEFF, kO},
        Case{0xAA, kL}, Case{0xB5, kL}, Case{0xE9, kL}, Case{0xDF, kL}, Case{0x0416, kL},
        Case{0x05D0, kL}, Case{0x0627, kL}, Case{0x4E2D, kL}, Case{0xAC00, kL},
        Case{0x3042, kL}, Case{0x02B0, kL},  // Lm
        Case{0xB2, kN}, Case{0xBD, kN}, Case{0x0663, kN}, Case{0x2160, kN}, Case{0x2460, kN},
        Case{0x0301, kO}, Case{0x200D, kO}, Case{0xFE0F, kO},  // marks, format
        Case{0x1F600, kO}, Case{0x20AC, kO}, Case{0xFFFD, kO}, Case{0xE000, kO},
        Case{0xD800, kO}, Case{0x0378, kO},  // surrogate, unassigned
        // Unicode 15.0 / 15.1 additions are known, 16.0 ones are not.
        Case{0x11F50, kN}, Case{0x31350, kL}, Case{0x2EBF0, kL}, Case{0x1CCF0, kO},
        Case{0x10FFFF, kO}, Case{0x110000, kO}, Case{0xFFFFFFFF, kO}));
// clang-format on

TEST(UnicodeTablesTest, WhitespaceIsExactlyWhiteSpaceProperty) {
  int count = 0;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) count += IsWhitespace(cp) ? 1 : 0;
  EXPECT_EQ(count, 25);
}

TEST(UnicodeTablesTest, PredicatesMatchClassifier) {
  EXPECT_TRUE(IsLetter(0x4E2D));
  EXPECT_FALSE(IsLetter('1'));
  EXPECT_TRUE(IsNumber(0x0663));
  EXPECT_FALSE(IsNumber('x'));
  EXPECT_TRUE(IsWhitespace(0x3000));
  EXPECT_FALSE(IsWhitespace('_'));
}

}  // namespace
}  // namespace pdserve
