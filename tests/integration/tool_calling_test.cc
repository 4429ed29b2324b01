// Tool calling on a model whose chat template calls tools (Qwen2.5-Coder):
// a forced call served by the disaggregated cluster (the prefill worker
// samples the first token under the tool grammar, the decode worker the
// rest) is token for token what the in-process engine writes, with
// speculation on and off; and the official `openai` SDK's tool round trip
// (openai_tools_check.py) passes against the router's HTTP front, leaving
// every KV block free.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cpu/cpu_model_runner.h"
#include "common/engine/engine.h"
#include "common/grammar/tokenizer_vocab.h"
#include "common/model/model.h"
#include "gtest/gtest.h"
#include "router/call/chat_tools.h"
#include "tests/golden/test_model.h"
#include "tests/testing/cluster_test_util.h"
#include "tests/testing/engine_run.h"
#include "tests/testing/file_contents.h"

namespace pdserve {
namespace {

constexpr char kQwen[] = "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf";
constexpr char kQwenName[] = "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M";
constexpr int kMaxTokens = 48;

v1::ChatInput WeatherChat(v1::ToolChoice::Mode mode) {
  v1::ChatInput chat;
  v1::ChatMessage* m = chat.add_messages();
  m->set_role("user");
  m->set_content("What is the weather like in Paris and in Rome today?");
  v1::Tool* t = chat.add_tools();
  t->set_name("get_weather");
  t->set_description("Get the current weather in a given city");
  t->set_parameters(
      R"({"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": )"
      R"("string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]})");
  chat.mutable_tool_choice()->set_mode(mode);
  chat.mutable_tool_choice()->set_parallel(true);
  return chat;
}

class ToolCallingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto model = Model::Load(testing::RealModelPath(kQwen));
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
    if (model_ == nullptr) GTEST_SKIP() << kQwen << " not found (scripts/fetch-model.sh)";
  }

  // The engine's greedy answer to `chat` in this process, as the router
  // would pose it: rendered with the tools, under the choice's grammar.
  static std::vector<int32_t> EngineAnswer(const v1::ChatInput& chat, bool speculate) {
    auto prepared = router::PrepareChat(chat, model_->chat_template().supports_tools());
    EXPECT_TRUE(prepared.ok()) << prepared.status();
    auto text = model_->chat_template().Render(prepared->messages, true, prepared->tools);
    EXPECT_TRUE(text.ok()) << text.status();
    SequenceOptions o;
    o.prompt = model_->tokenizer().EncodePrompt(*text);
    o.max_tokens = kMaxTokens;
    if (prepared->tool_grammar.has_value()) {
      o.sampling.constraint = GrammarConstraint::StructuralTag(*prepared->tool_grammar);
      auto grammar = compiler_->Compile(*o.sampling.constraint);
      EXPECT_TRUE(grammar.ok()) << grammar.status();
      o.grammar = *grammar;
    }
    CpuModelRunner runner(model_->config(), &model_->weights(), 2);
    auto cache = KvCache::Create(KvLayout::ForModel(model_->config(), 16), 64);
    EXPECT_TRUE(cache.ok()) << cache.status();
    Engine::Options eo;
    eo.speculation.enabled = speculate;
    eo.speculation.price_rows = false;  // draft whatever it finds
    Engine engine(&model_->tokenizer(), &runner, cache->get(), eo);
    return testing::RunAlone(engine, model_->tokenizer(), std::move(o));
  }

  static Model* model_;
  static GrammarCompiler* compiler_;
};

Model* ToolCallingTest::model_ = nullptr;
GrammarCompiler* ToolCallingTest::compiler_ = nullptr;

TEST_F(ToolCallingTest, ServedForcedCallsEqualTheEngineAndTheSdkRoundTrips) {
  LocalClusterOptions o;
  o.model = testing::RealModelPath(kQwen);
  o.extra_router_flags = {"--metrics_port=-1"};
  o.extra_decode_flags = {"--metrics_port=-1"};
  auto cluster = testing::StartCluster(o, "tool-calling");
  ASSERT_NE(cluster, nullptr);
  auto stub = testing::RouterStub(cluster->router_address());
  for (auto mode : {v1::ToolChoice::REQUIRED, v1::ToolChoice::AUTO}) {
    SCOPED_TRACE(v1::ToolChoice::Mode_Name(mode));
    const std::vector<int32_t> want = EngineAnswer(WeatherChat(mode), false);
    EXPECT_EQ(EngineAnswer(WeatherChat(mode), true), want);
    const std::string text = model_->tokenizer().Decode(want);
    if (mode == v1::ToolChoice::REQUIRED) {
      EXPECT_EQ(text.rfind("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {", 0), 0u)
          << text;
    }
    v1::GenerateRequest r;
    *r.mutable_chat() = WeatherChat(mode);
    r.set_max_tokens(kMaxTokens);
    r.set_return_token_ids(true);
    const testing::GenerateOutcome got = testing::Generate(*stub, r, absl::Minutes(2));
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    EXPECT_EQ(got.ids, want);
    EXPECT_EQ(got.finished.timings().prefill_mode(), "remote");
  }

  // The router counted the forced call's grammar; the decode worker masked.
  const int router_metrics = cluster->metrics_port("router");
  EXPECT_GE(testing::ScrapeMetric(router_metrics,
                                  R"(pdserve_router_tool_requests_total{choice="required"})"),
            1);
  EXPECT_GE(
      testing::ScrapeMetric(router_metrics,
                            R"(pdserve_router_constrained_requests_total{kind="structural_tag"})"),
      1);
  EXPECT_GT(testing::ScrapeMetric(router_metrics, "pdserve_router_grammar_compile_seconds_count"),
            0);
  EXPECT_GT(testing::ScrapeMetric(cluster->metrics_port("decode-0"),
                                  "pdserve_decode_grammar_masks_total"),
            0);

  const char* python = std::getenv("PDSERVE_OPENAI_PYTHON");
  if (python == nullptr || *python == '\0') {
    GTEST_SKIP() << "PDSERVE_OPENAI_PYTHON is not set (the release build's ctest sets it)";
  }
  const std::string log = testing::TestTempDir("tool-calling") + "/sdk.log";
  const std::string cmd =
      absl::StrCat(python, " ", testing::SourceDir(),
                   "/tests/integration/openai_tools_check.py --base-url http://",
                   cluster->http_address(), "/v1 --model ", kQwenName, " > ", log, " 2>&1");
  const int rc = std::system(cmd.c_str());
  const std::string out = testing::FileContents(log);
  EXPECT_EQ(rc, 0) << out;
  // The SDK's bad tool requests were refused for their tools.
  EXPECT_GE(testing::ScrapeMetric(router_metrics,
                                  R"(pdserve_router_structured_refusals_total{reason="tools"})"),
            2);
  EXPECT_TRUE(testing::PoolsIdle(*cluster, absl::Seconds(20)));
}

}  // namespace
}  // namespace pdserve
