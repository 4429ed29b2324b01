// Structured output on real models: a JSON schema, a regex, an EBNF grammar
// and "any JSON" hold on every token the engine samples, greedy answers are
// the same with speculation and logprobs on or off, a continuation (failover,
// migration) replays the output so far and goes on exactly as the first
// worker would have, and a served cluster — prefill worker sampling the
// first token, decode worker the rest — gives the engine's tokens over gRPC
// and a parseable answer over OpenAI's response_format. Bad constraints are
// refused at the router with INVALID_ARGUMENT / HTTP 400 before any worker
// works.
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "common/cpu/cpu_model_runner.h"
#include "common/engine/engine.h"
#include "common/grammar/tokenizer_vocab.h"
#include "common/model/model.h"
#include "common/request/sampling_proto.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/golden/test_model.h"
#include "tests/testing/cluster_test_util.h"
#include "tests/testing/http_test_client.h"

namespace pdserve {
namespace {

using Json = nlohmann::json;

constexpr char kPersonSchema[] =
    R"({"type": "object", "properties": {"name": {"type": "string"}, )"
    R"("age": {"type": "integer"}}, "required": ["name", "age"], "additionalProperties": false})";
constexpr char kPhoneRegex[] = "[0-9]{3}-[0-9]{4}";
constexpr char kYesNoGrammar[] = R"(root ::= ("yes" | "no") ", because " [a-z ]+ ".")";
constexpr int kMaxTokens = 64;

struct Case {
  std::string name;
  GrammarConstraint constraint;
  std::string question;
};

std::vector<Case> Cases() {
  return {
      {"schema", GrammarConstraint::JsonSchema(kPersonSchema),
       "Describe Alice, who is 30, as JSON with her name and age."},
      {"regex", GrammarConstraint::Regex(kPhoneRegex), "Make up a short phone number."},
      {"ebnf", GrammarConstraint::Ebnf(kYesNoGrammar), "Is the sea salty? Answer and say why."},
      {"json", GrammarConstraint::JsonObject(), "List three colours as JSON."},
  };
}

// Whether `text` is what `c` allows.
void ExpectConforms(const Case& c, const std::string& text) {
  switch (c.constraint.kind) {
    case GrammarKind::kJsonSchema: {
      const Json j = Json::parse(text, nullptr, false);
      ASSERT_TRUE(j.is_object()) << text;
      EXPECT_TRUE(j["name"].is_string()) << text;
      EXPECT_TRUE(j["age"].is_number_integer()) << text;
      EXPECT_EQ(j.size(), 2u) << text;
      break;
    }
    case GrammarKind::kJsonObject:
      EXPECT_FALSE(Json::parse(text, nullptr, false).is_discarded()) << text;
      break;
    case GrammarKind::kRegex:
      EXPECT_TRUE(std::regex_match(text, std::regex(c.constraint.text))) << text;
      break;
    case GrammarKind::kEbnf:
      EXPECT_TRUE(std::regex_match(text, std::regex("(yes|no), because [a-z ]+\\."))) << text;
      break;
    default:
      FAIL() << "no check for " << GrammarKindName(c.constraint.kind);
  }
}

class StructuredOutputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto model = Model::Load(testing::RealModelPath());
    if (!model.ok()) return;  // SetUp skips
    model_ = model->release();
    auto compiler = NewGrammarCompiler(model_->tokenizer(), model_->config().n_vocab);
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    compiler_ = compiler->release();
  }
  static void TearDownTestSuite() {
    delete compiler_;
    delete model_;
  }
  void SetUp() override {
    if (model_ == nullptr) GTEST_SKIP() << "SmolLM2 not found (scripts/fetch-model.sh)";
  }

  static std::vector<int32_t> ChatPrompt(const std::string& question) {
    return model_->tokenizer().EncodePrompt(
        *model_->chat_template().Render({{"user", question}}, true));
  }

  struct Run {
    std::vector<int32_t> tokens;
    FinishReason finish = FinishReason::kNone;
  };
  // One sequence on a fresh engine in this process.
  static absl::StatusOr<Run> Generate(SequenceOptions o, bool speculate) {
    CpuModelRunner runner(model_->config(), &model_->weights(), 2);
    auto cache = KvCache::Create(KvLayout::ForModel(model_->config(), 16), 64);
    if (!cache.ok()) return cache.status();
    Engine::Options eo;
    eo.speculation.enabled = speculate;
    eo.speculation.price_rows = false;  // draft whatever it finds
    Engine engine(&model_->tokenizer(), &runner, cache->get(), eo);
    Run run;
    absl::StatusOr<int64_t> id = engine.Add(std::move(o), [&run](const TokenEvent& e) {
      if (e.token >= 0) run.tokens.push_back(e.token);
      if (e.finish != FinishReason::kNone) run.finish = e.finish;
    });
    if (!id.ok()) return id.status();
    while (engine.HasWork()) {
      if (absl::Status s = engine.Step(); !s.ok()) return s;
    }
    return run;
  }
  static SequenceOptions Options(const Case& c) {
    SequenceOptions o;
    o.prompt = ChatPrompt(c.question);
    o.max_tokens = kMaxTokens;
    o.sampling.constraint = c.constraint;
    auto grammar = compiler_->Compile(c.constraint);
    EXPECT_TRUE(grammar.ok()) << grammar.status();
    if (grammar.ok()) o.grammar = *grammar;
    return o;
  }
  static std::string Text(const std::vector<int32_t>& tokens) {
    std::vector<int32_t> body = tokens;
    // The end-of-generation token closes the answer; it is not text.
    if (!body.empty() && model_->tokenizer().IsEog(body.back())) body.pop_back();
    return model_->tokenizer().Decode(body);
  }

  static Model* model_;
  static GrammarCompiler* compiler_;
};

Model* StructuredOutputTest::model_ = nullptr;
GrammarCompiler* StructuredOutputTest::compiler_ = nullptr;

TEST_F(StructuredOutputTest, EveryAnswerConformsWhateverTheEngineDoes) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Run> plain = Generate(Options(c), /*speculate=*/false);
    ASSERT_TRUE(plain.ok()) << plain.status();
    // Free JSON may nest until max_tokens cuts it (this model does): such an
    // answer ends with `length`, as OpenAI's do, and is a prefix only.
    if (c.constraint.kind != GrammarKind::kJsonObject) {
      EXPECT_EQ(plain->finish, FinishReason::kEos) << Text(plain->tokens);
    }
    if (plain->finish == FinishReason::kEos) ExpectConforms(c, Text(plain->tokens));
    absl::StatusOr<Run> drafted = Generate(Options(c), /*speculate=*/true);
    ASSERT_TRUE(drafted.ok()) << drafted.status();
    EXPECT_EQ(drafted->tokens, plain->tokens);
    SequenceOptions with_logprobs = Options(c);
    with_logprobs.sampling.logprobs = 2;
    absl::StatusOr<Run> logprobs = Generate(std::move(with_logprobs), /*speculate=*/false);
    ASSERT_TRUE(logprobs.ok()) << logprobs.status();
    EXPECT_EQ(logprobs->tokens, plain->tokens);
    // Sampled, not greedy: still inside the grammar.
    SequenceOptions sampled = Options(c);
    sampled.sampling.temperature = 1.0f;
    sampled.sampling.seed = 7;
    absl::StatusOr<Run> hot = Generate(std::move(sampled), /*speculate=*/true);
    ASSERT_TRUE(hot.ok()) << hot.status();
    if (hot->finish == FinishReason::kEos) ExpectConforms(c, Text(hot->tokens));
  }
}

// What a failover or a migration sends the next decode worker: the prompt
// followed by the tokens made so far, first_index of them.
TEST_F(StructuredOutputTest, ContinuationReplaysTheOutputSoFar) {
  const Case c = Cases()[0];
  absl::StatusOr<Run> whole = Generate(Options(c), false);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_GT(whole->tokens.size(), 4u);
  for (size_t k : {size_t{1}, whole->tokens.size() / 2}) {
    SequenceOptions o = Options(c);
    o.prompt.insert(o.prompt.end(), whole->tokens.begin(), whole->tokens.begin() + k);
    o.first_index = static_cast<int32_t>(k);
    absl::StatusOr<Run> rest = Generate(std::move(o), false);
    ASSERT_TRUE(rest.ok()) << rest.status();
    EXPECT_EQ(rest->tokens, std::vector<int32_t>(whole->tokens.begin() + k, whole->tokens.end()))
        << "continued after " << k;
  }
  // Output so far that the grammar forbids: refused, not continued.
  SequenceOptions bad = Options(c);
  const std::vector<int32_t> junk = model_->tokenizer().Encode("hello", false);
  bad.prompt.insert(bad.prompt.end(), junk.begin(), junk.end());
  bad.first_index = static_cast<int32_t>(junk.size());
  EXPECT_EQ(Generate(std::move(bad), false).status().code(), absl::StatusCode::kInvalidArgument);
}

// The served path: the prefill worker samples the first token under the
// constraint, the decode worker (speculating, its default) the rest.
TEST_F(StructuredOutputTest, ServedDisaggregatedEqualsTheEngine) {
  LocalClusterOptions o;
  o.model = testing::RealModelPath();
  auto cluster = testing::StartCluster(o, "structured-output");
  ASSERT_NE(cluster, nullptr);
  auto stub = testing::RouterStub(cluster->router_address());
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Run> want = Generate(Options(c), false);
    ASSERT_TRUE(want.ok()) << want.status();
    v1::GenerateRequest r = testing::ChatRequest(c.question, kMaxTokens);
    r.set_return_token_ids(true);
    SamplingParams sampling;
    sampling.constraint = c.constraint;
    *r.mutable_sampling() = ToProto(sampling);
    const testing::GenerateOutcome got = testing::Generate(*stub, r, absl::Minutes(2));
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    // The router reports the answer's tokens without the end-of-generation one.
    std::vector<int32_t> answer = want->tokens;
    if (want->finish == FinishReason::kEos) answer.pop_back();
    EXPECT_EQ(got.ids, answer);
    EXPECT_EQ(got.finished.timings().prefill_mode(), "remote");
  }
  // OpenAI's response_format, through the router's HTTP front.
  const Json body = {
      {"messages", {{{"role", "user"}, {"content", Cases()[0].question}}}},
      {"max_tokens", kMaxTokens},
      {"temperature", 0},
      {"response_format",
       {{"type", "json_schema"},
        {"json_schema",
         {{"name", "person"}, {"strict", true}, {"schema", Json::parse(kPersonSchema)}}}}}};
  testing::HttpResult http =
      testing::HttpCall(cluster->http_address(), "POST", "/v1/chat/completions", body.dump());
  ASSERT_EQ(http.status, 200) << http.body;
  const Json answer = Json::parse(http.body);
  ExpectConforms(Cases()[0], answer["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_EQ(answer["choices"][0]["finish_reason"], "stop");

  // Refused at admission, naming what is wrong; the cluster keeps serving.
  v1::GenerateRequest bad = testing::ChatRequest("Hi", 4);
  bad.mutable_sampling()->mutable_constraint()->set_regex("(unclosed");
  const testing::GenerateOutcome refused = testing::Generate(*stub, bad, absl::Minutes(1));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.status.error_message().find("sampling.constraint"), std::string::npos)
      << refused.status.error_message();
  Json bad_body = body;
  bad_body["response_format"]["json_schema"]["schema"] = {{"type", "no-such-type"}};
  http =
      testing::HttpCall(cluster->http_address(), "POST", "/v1/chat/completions", bad_body.dump());
  EXPECT_EQ(http.status, 400) << http.body;
  EXPECT_TRUE(testing::PoolsIdle(*cluster, absl::Seconds(10)));
}

// Colocated: the decode worker prefills and samples the first token itself.
TEST_F(StructuredOutputTest, ServedColocatedEqualsTheEngine) {
  LocalClusterOptions o;
  o.model = testing::RealModelPath();
  o.colocated = true;
  auto cluster = testing::StartCluster(o, "structured-output-colocated");
  ASSERT_NE(cluster, nullptr);
  auto stub = testing::RouterStub(cluster->router_address());
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Run> want = Generate(Options(c), true);
    ASSERT_TRUE(want.ok()) << want.status();
    v1::GenerateRequest r = testing::ChatRequest(c.question, kMaxTokens);
    SamplingParams sampling;
    sampling.constraint = c.constraint;
    *r.mutable_sampling() = ToProto(sampling);
    const testing::GenerateOutcome got = testing::Generate(*stub, r, absl::Minutes(2));
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    std::vector<int32_t> answer = want->tokens;
    if (want->finish == FinishReason::kEos) answer.pop_back();
    EXPECT_EQ(got.ids, answer);
    EXPECT_EQ(got.finished.timings().prefill_mode(), "local");
  }
  EXPECT_TRUE(testing::PoolsIdle(*cluster, absl::Seconds(10)));
}

}  // namespace
}  // namespace pdserve
