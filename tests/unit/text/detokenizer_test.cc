#include "common/text/detokenizer.h"

#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/gguf/gguf_file.h"
#include "common/text/tokenizer.h"
#include "common/text/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/golden/test_model.h"
#include "tests/testing/tokenizer_test_util.h"

namespace pdserve {
namespace {

using ::testing::ElementsAre;
using tokenizer_test::AddToken;
using tokenizer_test::ByteVocab;

constexpr std::string_view kFffd = "\xEF\xBF\xBD";

bool IsValidUtf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Char c = DecodeUtf8(s, pos);
    if (c.status != Utf8Status::kOk) return false;
    pos += c.length;
  }
  return true;
}

// Pushes each byte of `bytes` as its own token (ids == byte values in
// ByteVocab) and returns the chunks, the last one from Flush().
std::vector<std::string> StreamBytes(const Tokenizer& t, std::string_view bytes) {
  IncrementalDetokenizer d(t);
  std::vector<std::string> chunks;
  for (const char c : bytes) chunks.push_back(d.Push(static_cast<uint8_t>(c)));
  chunks.push_back(d.Flush());
  return chunks;
}

class DetokenizerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Tokenizer> bytes_ = std::move(Tokenizer::FromVocab(ByteVocab())).value();
};

TEST_F(DetokenizerTest, EmojiSplitOverFourTokensComesOutWhole) {
  EXPECT_THAT(StreamBytes(*bytes_, "\xF0\x9F\x98\x80"),
              ElementsAre("", "", "", "\xF0\x9F\x98\x80", ""));
}

TEST_F(DetokenizerTest, AsciiIsEmittedImmediately) {
  EXPECT_THAT(StreamBytes(*bytes_, "hi"), ElementsAre("h", "i", ""));
}

TEST_F(DetokenizerTest, CjkSplitAcrossMultiByteTokens) {
  TokenizerVocab v = ByteVocab({{"X", "\xE4"}, {"\xB8", "\xAD"}});
  auto t = std::move(Tokenizer::FromVocab(v)).value();
  const std::vector<int32_t> ids = t->Encode("X\xE4\xB8\xAD", false);
  ASSERT_THAT(ids, ElementsAre(256, 257));
  IncrementalDetokenizer d(*t);
  EXPECT_EQ(d.Push(ids[0]), "X");
  EXPECT_EQ(d.Push(ids[1]), "\xE4\xB8\xAD");
  EXPECT_EQ(d.Flush(), "");
}

TEST_F(DetokenizerTest, ByteThatCanNeverBeValidIsReplacedAtOnce) {
  EXPECT_THAT(StreamBytes(*bytes_, "a\377b"), ElementsAre("a", kFffd, "b", ""));
}

TEST_F(DetokenizerTest, InterruptedSequenceIsReplacedWhenItFails) {
  // C3 waits for a continuation byte; 'b' proves it will never come.
  EXPECT_THAT(StreamBytes(*bytes_, "a\303b"), ElementsAre("a", "", std::string(kFffd) + "b", ""));
  // One U+FFFD per maximal subpart: E4 B8 is one unfinished character.
  EXPECT_THAT(StreamBytes(*bytes_, "\344\270c"), ElementsAre("", "", std::string(kFffd) + "c", ""));
}

TEST_F(DetokenizerTest, SurrogatesAndOverlongsAreInvalid) {
  // ED might still start U+D000..U+D7FF, so it waits; A0 rules that out.
  EXPECT_THAT(StreamBytes(*bytes_, "\xED\xA0\x80"),
              ElementsAre("", std::string(kFffd) + std::string(kFffd), kFffd, ""));
  EXPECT_THAT(StreamBytes(*bytes_, "\xC0\xAF"), ElementsAre(kFffd, kFffd, ""));
}

TEST_F(DetokenizerTest, FlushReplacesUnfinishedTail) {
  IncrementalDetokenizer d(*bytes_);
  EXPECT_EQ(d.Push('o'), "o");
  EXPECT_EQ(d.Push(0xE4), "");
  EXPECT_EQ(d.Push(0xB8), "");
  EXPECT_EQ(d.Flush(), kFffd);
  EXPECT_EQ(d.Flush(), "");
  EXPECT_EQ(d.Push('k'), "k");  // usable for a new stream
}

TEST_F(DetokenizerTest, ControlTokensRenderOnlyWhenAsked) {
  TokenizerVocab v = ByteVocab();
  const int32_t end = AddToken(&v, "<|im_end|>", TokenType::kControl);
  auto t = std::move(Tokenizer::FromVocab(v)).value();
  IncrementalDetokenizer quiet(*t);
  EXPECT_EQ(quiet.Push(end), "");
  IncrementalDetokenizer loud(*t, /*render_special=*/true);
  EXPECT_EQ(loud.Push(end), "<|im_end|>");
}

TEST_F(DetokenizerTest, EveryChunkIsValidUtf8ForRandomBytes) {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 500; ++iter) {
    std::string bytes(rng() % 24, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 256);
    for (const std::string& chunk : StreamBytes(*bytes_, bytes)) {
      ASSERT_TRUE(IsValidUtf8(chunk)) << "chunk from random bytes is not UTF-8";
    }
  }
}

TEST(RealDetokenizerTest, StreamingMatchesFullDecode) {
  const std::string path = testing::RealModelPath();
  if (path.empty()) GTEST_SKIP() << "SmolLM2 model not found";
  auto gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto t = std::move(Tokenizer::FromGguf(**gguf)).value();
  const std::string texts[] = {
      "I love \xF0\x9F\x8D\x95 and \xF0\x9F\x8D\xA3!",
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 family",
      "\xF0\x9F\x87\xBA\xF0\x9F\x87\xB8\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7",
      "\xE4\xB8\xAD\xE6\x96\x87\xE6\xB5\x8B\xE8\xAF\x95\xEF\xBC\x9A\xE4\xBD\xA0\xE5\xA5\xBD",
      "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",
      "plain ascii, nothing held back"};
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = t->Encode(text, false);
    IncrementalDetokenizer d(*t);
    std::string streamed;
    bool held_back = false;
    for (const int32_t id : ids) {
      const std::string chunk = d.Push(id);
      ASSERT_TRUE(IsValidUtf8(chunk));
      held_back |= chunk.empty();
      streamed += chunk;
    }
    streamed += d.Flush();
    EXPECT_EQ(streamed, text);
    if (text.starts_with("I love")) {
      EXPECT_TRUE(held_back) << "the emoji should span tokens";
    }
  }
}

}  // namespace
}  // namespace pdserve
