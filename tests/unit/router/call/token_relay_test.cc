#include "router/call/token_relay.h"

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

// Gives every id of `t` a logprobs entry whose value encodes the token's
// index (-1 - index), so a test can tell whose entry a chunk carries.
v1::Tokens WithLogprobs(v1::Tokens t) {
  t.clear_logprobs();
  for (int i = 0; i < t.ids_size(); ++i) {
    v1::TokenLogprobs* l = t.add_logprobs();
    l->set_token(t.ids(i));
    l->set_logprob(-1.0f - static_cast<float>(t.first_index() + i));
  }
  return t;
}

// The indices encoded in a chunk's logprobs, after checking that they pair
// with its token ids one for one.
std::vector<int> LogprobIndices(const v1::Chunk& c) {
  EXPECT_EQ(c.logprobs_size(), c.token_ids_size());
  std::vector<int> out;
  for (int i = 0; i < c.logprobs_size() && i < c.token_ids_size(); ++i) {
    EXPECT_EQ(c.logprobs(i).token(), c.token_ids(i)) << i;
    out.push_back(static_cast<int>(-1.0f - c.logprobs(i).logprob()));
  }
  return out;
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

// With logprobs the chunk carries ids (return_token_ids unset) and one
// entry per id; a resent duplicate and tokens past max_tokens lose theirs
// with the ids.
TEST_F(TokenRelayTest, LogprobsFollowIdsThroughDuplicatesAndMaxTokens) {
  TokenRelay relay(*tokenizer_, {.max_tokens = 5, .logprobs = true});
  auto out = relay.Push(WithLogprobs(Tok(0, "ab")));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->chunk.token_ids_size(), 2);
  EXPECT_EQ(LogprobIndices(out->chunk), (std::vector<int>{0, 1}));
  // A failover's worker resends index 1; "f" is the 6th token.
  out = relay.Push(WithLogprobs(Tok(1, "bcdef")));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->chunk.text(), "cde");
  EXPECT_EQ(LogprobIndices(out->chunk), (std::vector<int>{2, 3, 4}));
  EXPECT_TRUE(relay.ended());
}

TEST_F(TokenRelayTest, EndOfGenerationTokenTakesItsLogprobsAlong) {
  v1::Tokens t = Tok(0, "ab");
  t.add_ids(kEos);
  t = WithLogprobs(t);
  TokenRelay relay(*tokenizer_, {.max_tokens = 100, .logprobs = true});
  auto out = relay.Push(t);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(LogprobIndices(out->chunk), (std::vector<int>{0, 1}));

  TokenRelay ignoring(*tokenizer_, {.max_tokens = 100, .ignore_eos = true, .logprobs = true});
  out = ignoring.Push(t);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(LogprobIndices(out->chunk), (std::vector<int>{0, 1, 2}));
}

// The token that completes a stop string is relayed (its id, and so its
// logprobs), the ones after it are not.
TEST_F(TokenRelayTest, LogprobsStopWithTheStopString) {
  TokenRelay relay(*tokenizer_, {.max_tokens = 100, .stop = {"\n\n"}, .logprobs = true});
  auto out = relay.Push(WithLogprobs(Tok(0, "one\n")));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(LogprobIndices(out->chunk), (std::vector<int>{0, 1, 2, 3}));
  out = relay.Push(WithLogprobs(Tok(4, "\ntwo")));
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->stopped);
  EXPECT_EQ(LogprobIndices(out->chunk), (std::vector<int>{4}));
}

TEST_F(TokenRelayTest, TokensWithoutUsableLogprobsAreRelayedWithout) {
  TokenRelay relay(*tokenizer_, {.max_tokens = 100, .logprobs = true});
  auto out = relay.Push(Tok(0, "ab"));  // a worker that predates logprobs
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->chunk.token_ids_size(), 2);
  EXPECT_EQ(out->chunk.logprobs_size(), 0);
  v1::Tokens partial = Tok(2, "cd");
  partial.add_logprobs()->set_token('c');  // not one per id: unusable
  out = relay.Push(partial);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->chunk.token_ids_size(), 2);
  EXPECT_EQ(out->chunk.logprobs_size(), 0);
  out = relay.Push(WithLogprobs(Tok(4, "e")));  // and with them again
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(LogprobIndices(out->chunk), (std::vector<int>{4}));

  // Not requested: neither logprobs nor ids, whatever the worker sends.
  TokenRelay plain(*tokenizer_, {.max_tokens = 100});
  out = plain.Push(WithLogprobs(Tok(0, "ab")));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->chunk.token_ids_size(), 0);
  EXPECT_EQ(out->chunk.logprobs_size(), 0);
}

}  // namespace
}  // namespace pdserve::router
