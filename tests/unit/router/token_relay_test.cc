#include "router/token_relay.h"

#include <memory>
#include <string>
#include <vector>

#include "common/text/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/byte_tokenizer.h"

namespace pdserve::router {
namespace {

constexpr int32_t kEos = testing::kByteTokenizerEos;

using testing::ByteTokenizer;

v1::Tokens Tok(int first, const std::string& bytes) {
  v1::Tokens t;
  t.set_first_index(first);
  for (unsigned char c : bytes) t.add_ids(c);
  return t;
}

class TokenRelayTest : public ::testing::Test {
 protected:
  std::unique_ptr<Tokenizer> tokenizer_ = ByteTokenizer();
};

TEST_F(TokenRelayTest, DropsDuplicatesAndReportsGaps) {
  TokenRelay relay(*tokenizer_, {.max_tokens = 100, .return_token_ids = true});
  auto out = relay.Push(Tok(0, "abc"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->chunk.text(), "abc");
  out = relay.Push(Tok(1, "bcd"));  // overlaps: only "d" is new
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->chunk.text(), "d");
  EXPECT_EQ(out->chunk.token_ids_size(), 1);
  EXPECT_EQ(relay.completion_tokens(), 4);
  EXPECT_EQ(relay.Push(Tok(6, "z")).status().code(), absl::StatusCode::kInternal);
}

TEST_F(TokenRelayTest, HoldsIncompleteUtf8AndCapsAtMaxTokens) {
  TokenRelay relay(*tokenizer_, {.max_tokens = 3});
  auto out = relay.Push(Tok(0, "a\xC3"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->chunk.text(), "a");
  out = relay.Push(Tok(2, "\xA9zzz"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->chunk.text(), "\xC3\xA9");  // the 4th..6th tokens are beyond max_tokens
  EXPECT_EQ(relay.completion_tokens(), 3);
  EXPECT_FALSE(relay.Flush().has_chunk);
}

TEST_F(TokenRelayTest, StopStringEndsTheStream) {
  TokenRelay relay(*tokenizer_, {.max_tokens = 100, .stop = {"\n\n"}});
  auto out = relay.Push(Tok(0, "one\n"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->chunk.text(), "one");
  EXPECT_FALSE(out->stopped);
  out = relay.Push(Tok(4, "\ntwo"));
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->stopped);
  EXPECT_EQ(out->chunk.text(), "");
  EXPECT_EQ(relay.completion_tokens(), 5);  // up to the token that completed the match
}

TEST_F(TokenRelayTest, KeepsGeneratedIdsForAFailoverAndKnowsWhenItEnded) {
  TokenRelay relay(*tokenizer_, {.max_tokens = 4});
  ASSERT_TRUE(relay.Push(Tok(0, "ab")).ok());
  EXPECT_EQ(relay.generated_ids(), (std::vector<int32_t>{'a', 'b'}));
  EXPECT_FALSE(relay.ended());
  // The next decode worker continues at index 2; a resent overlap is dropped.
  ASSERT_TRUE(relay.Push(Tok(1, "bcd")).ok());
  EXPECT_EQ(relay.generated_ids(), (std::vector<int32_t>{'a', 'b', 'c', 'd'}));
  EXPECT_TRUE(relay.ended());  // max_tokens reached

  TokenRelay eos(*tokenizer_, {.max_tokens = 100});
  v1::Tokens t = Tok(0, "a");
  t.add_ids(kEos);
  ASSERT_TRUE(eos.Push(t).ok());
  EXPECT_TRUE(eos.ended());
}

TEST_F(TokenRelayTest, EndOfGenerationTokenIsCountedButNotOutput) {
  v1::Tokens t = Tok(0, "ab");
  t.add_ids(kEos);
  TokenRelay relay(*tokenizer_, {.max_tokens = 100, .return_token_ids = true});
  auto out = relay.Push(t);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->chunk.text(), "ab");
  EXPECT_EQ(out->chunk.token_ids_size(), 2);
  EXPECT_EQ(relay.completion_tokens(), 3);

  TokenRelay ignoring(*tokenizer_,
                      {.max_tokens = 100, .return_token_ids = true, .ignore_eos = true});
  out = ignoring.Push(t);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->chunk.token_ids_size(), 3);
}

TEST_F(TokenRelayTest, FlushReleasesHeldText) {
  TokenRelay relay(*tokenizer_, {.max_tokens = 100, .stop = {"END"}});
  auto out = relay.Push(Tok(0, "xEN"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->chunk.text(), "x");
  TokenRelay::Output tail = relay.Flush();
  EXPECT_TRUE(tail.has_chunk);
  EXPECT_EQ(tail.chunk.text(), "EN");
}

}  // namespace
}  // namespace pdserve::router
