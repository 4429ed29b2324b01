#include "router/call/request_validator.h"

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/grammar/tokenizer_vocab.h"
#include "common/model/model_card.h"
#include "common/model/random_model.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace pdserve::router {
namespace {

class RequestValidatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path =
        pdserve::testing::TestTempDir("request-validator-test") + "/model.gguf";
    RandomModelSpec spec;  // context 256, vocab 320
    ASSERT_TRUE(WriteRandomModelGguf(spec, path).ok());
    auto model = ModelCard::Load(path);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model).release();
  }
  static void TearDownTestSuite() { delete model_; }

  RequestValidatorTest() {
    config_.max_prompt_tokens = 200;
    config_.max_tokens_limit = 100;
    config_.max_stop_strings = 2;
    config_.max_stop_string_bytes = 8;
  }

  absl::StatusOr<ValidatedRequest> Validate(const v1::GenerateRequest& r) {
    return RequestValidator(*model_, config_).Validate(r);
  }

  static ModelCard* model_;
  RouterConfig config_;
};

ModelCard* RequestValidatorTest::model_ = nullptr;

v1::GenerateRequest Text(const std::string& text) {
  v1::GenerateRequest r;
  r.set_text(text);
  return r;
}

TEST_F(RequestValidatorTest, AcceptsTextChatAndTokens) {
  absl::StatusOr<ValidatedRequest> v = Validate(Text("hello <|im_end|>"));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->prompt_tokens.back(), 2);  // special tokens are parsed
  EXPECT_EQ(v->max_tokens, kDefaultMaxTokens);

  v1::GenerateRequest chat;
  auto* m = chat.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("hi");
  v = Validate(chat);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->prompt_tokens.front(), 1);  // <|im_start|>

  v1::GenerateRequest tokens;
  tokens.mutable_tokens()->add_ids(5);
  tokens.mutable_tokens()->add_ids(319);
  tokens.set_max_tokens(7);
  tokens.add_stop("x");
  v = Validate(tokens);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->prompt_tokens, (std::vector<int32_t>{5, 319}));
  EXPECT_EQ(v->max_tokens, 7);
  EXPECT_EQ(v->stop, std::vector<std::string>{"x"});
}

TEST_F(RequestValidatorTest, DefaultMaxTokensShrinksToTheContext) {
  v1::GenerateRequest r;
  for (int i = 0; i < 200; ++i) r.mutable_tokens()->add_ids(10);
  absl::StatusOr<ValidatedRequest> v = Validate(r);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->max_tokens, 56);  // 256 - 200
}

// Any set count, 0 included, makes the chunks carry logprobs; the
// request's sampling goes to the workers as sent.
TEST_F(RequestValidatorTest, LogprobsAreRequestedBySettingTheCount) {
  absl::StatusOr<ValidatedRequest> v = Validate(Text("hello"));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_FALSE(v->logprobs);
  for (int32_t n : {0, 20}) {
    v1::GenerateRequest r = Text("hello");
    r.mutable_sampling()->set_logprobs(n);
    v = Validate(r);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_TRUE(v->logprobs) << n;
    EXPECT_EQ(v->sampling.logprobs(), n);
  }
}

struct BadCase {
  std::string name;
  std::function<void(v1::GenerateRequest&)> mutate;
  absl::StatusCode code;
  std::string message;  // substring
};

TEST_F(RequestValidatorTest, RejectsBadInput) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  using absl::StatusCode;
  const std::vector<BadCase> cases = {
      {"no input", [](auto& r) { r.clear_text(); }, StatusCode::kInvalidArgument, "exactly one"},
      {"empty text", [](auto& r) { r.set_text(""); }, StatusCode::kInvalidArgument, "empty"},
      {"empty chat", [](auto& r) { r.mutable_chat(); }, StatusCode::kInvalidArgument, "chat"},
      {"bad role",
       [](auto& r) {
         auto* m = r.mutable_chat()->add_messages();
         m->set_role("wizard");
       },
       StatusCode::kInvalidArgument, "chat"},
      {"empty token list", [](auto& r) { r.mutable_tokens(); }, StatusCode::kInvalidArgument,
       "tokens.ids is empty"},
      {"token id too large", [](auto& r) { r.mutable_tokens()->add_ids(320); },
       StatusCode::kInvalidArgument, "tokens.ids[0] = 320"},
      {"negative token id", [](auto& r) { r.mutable_tokens()->add_ids(-1); },
       StatusCode::kInvalidArgument, "-1"},
      {"negative max_tokens", [](auto& r) { r.set_max_tokens(-3); }, StatusCode::kInvalidArgument,
       "max_tokens = -3"},
      {"max_tokens over the limit", [](auto& r) { r.set_max_tokens(101); }, StatusCode::kOutOfRange,
       "101"},
      {"prompt + max_tokens beyond context",
       [](auto& r) {
         for (int i = 0; i < 200; ++i) r.mutable_tokens()->add_ids(10);
         r.set_max_tokens(60);
       },
       StatusCode::kOutOfRange, "prompt (200 tokens) + max_tokens (60) = 260"},
      {"prompt over the limit",
       [](auto& r) {
         for (int i = 0; i < 201; ++i) r.mutable_tokens()->add_ids(10);
       },
       StatusCode::kOutOfRange, "201"},
      {"NaN temperature", [=](auto& r) { r.mutable_sampling()->set_temperature(kNaN); },
       StatusCode::kInvalidArgument, "temperature"},
      {"negative top_p", [](auto& r) { r.mutable_sampling()->set_top_p(-1); },
       StatusCode::kInvalidArgument, "top_p"},
      {"negative top_k", [](auto& r) { r.mutable_sampling()->set_top_k(-1); },
       StatusCode::kInvalidArgument, "top_k"},
      {"too many logprobs", [](auto& r) { r.mutable_sampling()->set_logprobs(21); },
       StatusCode::kInvalidArgument, "sampling.logprobs = 21"},
      {"too many stops",
       [](auto& r) {
         r.add_stop("a");
         r.add_stop("b");
         r.add_stop("c");
       },
       StatusCode::kInvalidArgument, "at most 2"},
      {"empty stop", [](auto& r) { r.add_stop(""); }, StatusCode::kInvalidArgument,
       "stop[0] is empty"},
      {"long stop", [](auto& r) { r.add_stop("123456789"); }, StatusCode::kInvalidArgument,
       "stop[0] is 9 bytes"},
      {"request id with spaces", [](auto& r) { r.set_request_id("a b"); },
       StatusCode::kInvalidArgument, "request_id"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    v1::GenerateRequest r = Text("hello");
    c.mutate(r);
    absl::StatusOr<ValidatedRequest> v = Validate(r);
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().code(), c.code) << v.status();
    EXPECT_NE(v.status().message().find(c.message), absl::string_view::npos) << v.status();
  }
}

// A ChatML template with Hermes tool calling, as Qwen2.5's (trimmed).
constexpr char kToolTemplate[] =
    "{%- if tools %}{{- '<|im_start|>system\\n' }}{{- \"\\n\\n# Tools\\n<tools>\" }}"
    "{%- for tool in tools %}{{- \"\\n\" }}{{- tool | tojson }}{%- endfor %}"
    "{{- \"\\n</tools>\\nCall as <tool_call></tool_call><|im_end|>\\n\" }}{%- endif %}"
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
    "'<|im_end|>\\n' }}{{- '<tool_response>' }}{%- endfor %}";

class RequestValidatorToolsTest : public ::testing::Test {
 public:
  static v1::GenerateRequest ToolRequest(v1::ToolChoice::Mode mode);

 protected:
  static void SetUpTestSuite() {
    const std::string path =
        pdserve::testing::TestTempDir("request-validator-tools-test") + "/model.gguf";
    RandomModelSpec spec;
    spec.chat_template = kToolTemplate;
    ASSERT_TRUE(WriteRandomModelGguf(spec, path).ok());
    auto model = ModelCard::Load(path);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model).release();
    auto grammars = NewGrammarCompiler(model_->tokenizer(), model_->config().n_vocab);
    ASSERT_TRUE(grammars.ok()) << grammars.status();
    grammars_ = std::move(*grammars).release();
  }
  static void TearDownTestSuite() {
    delete grammars_;
    delete model_;
  }

  absl::StatusOr<ValidatedRequest> Validate(const v1::GenerateRequest& r) {
    return RequestValidator(*model_, config_, grammars_).Validate(r);
  }

  static inline ModelCard* model_ = nullptr;
  static inline GrammarCompiler* grammars_ = nullptr;
  RouterConfig config_;
};

v1::GenerateRequest RequestValidatorToolsTest::ToolRequest(v1::ToolChoice::Mode mode) {
  v1::GenerateRequest r;
  v1::ChatMessage* m = r.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("hi");
  v1::Tool* t = r.mutable_chat()->add_tools();
  t->set_name("f");
  t->set_parameters(R"({"type": "object", "properties": {"x": {"type": "integer"}}})");
  r.mutable_chat()->mutable_tool_choice()->set_mode(mode);
  r.mutable_chat()->mutable_tool_choice()->set_function("f");
  r.set_max_tokens(8);
  return r;
}

TEST_F(RequestValidatorToolsTest, ToolsRenderAndForcedChoicesBecomeTheConstraint) {
  auto with_tools =
      RequestValidator(*model_, config_).EncodeChat(ToolRequest(v1::ToolChoice::AUTO).chat());
  auto without =
      RequestValidator(*model_, config_).EncodeChat(ToolRequest(v1::ToolChoice::NONE).chat());
  ASSERT_TRUE(with_tools.ok() && without.ok());
  EXPECT_GT(with_tools->size(), without->size());  // the tool list is in the prompt

  auto v = Validate(ToolRequest(v1::ToolChoice::AUTO));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_FALSE(v->sampling.has_constraint());
  for (auto mode : {v1::ToolChoice::REQUIRED, v1::ToolChoice::FUNCTION}) {
    v = Validate(ToolRequest(mode));
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_NE(v->sampling.constraint().structural_tag().find("<tool_call>"), std::string::npos);
  }
}

TEST_F(RequestValidatorToolsTest, BadToolRequestsAreInvalidArgument) {
  v1::GenerateRequest r = ToolRequest(v1::ToolChoice::REQUIRED);
  r.mutable_sampling()->mutable_constraint()->set_json_object(true);
  EXPECT_EQ(Validate(r).status().code(), absl::StatusCode::kInvalidArgument);
  r = ToolRequest(v1::ToolChoice::FUNCTION);
  r.mutable_chat()->mutable_tool_choice()->set_function("g");
  EXPECT_EQ(Validate(r).status().code(), absl::StatusCode::kInvalidArgument);
  // A schema XGrammar cannot compile is refused at admission, named.
  r = ToolRequest(v1::ToolChoice::REQUIRED);
  r.mutable_chat()->mutable_tools(0)->set_parameters(R"({"type": "object", "$ref": "#/nowhere"})");
  auto v = Validate(r);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << v.status();
}

// The plain ChatML template has no tool calling: tools are refused.
TEST_F(RequestValidatorTest, ToolsNeedATemplateWithToolCalling) {
  v1::GenerateRequest r = RequestValidatorToolsTest::ToolRequest(v1::ToolChoice::AUTO);
  auto v = Validate(r);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(v.status().message().find("no tool calling"), absl::string_view::npos) << v.status();
  r.mutable_chat()->mutable_tool_choice()->set_mode(v1::ToolChoice::NONE);
  EXPECT_TRUE(Validate(r).ok());
}

}  // namespace
}  // namespace pdserve::router
