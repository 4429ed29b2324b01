// The models beyond SmolLM2 end to end: Qwen2.5-Coder (qwen2) and Gemma 3
// (gemma3, sliding window) served disaggregated (KV over TCP) and
// colocated give the greedy tokens of the engine in this process, a Gemma
// prompt of ~2,000 tokens included (four times its 512-token window). A
// window layer's KV travels only for the prompt's last window
// (KvLayout::FirstSentBlock): the bytes moved must be exactly that, and are
// printed against the bytes of every layer's blocks for docs/PERFORMANCE.md. A base
// model (Gemma 3 270M has no chat template) refuses chat with
// INVALID_ARGUMENT and keeps serving.
#include <iostream>
#include <string>
#include <vector>

#include "common/cpu/cpu_model_runner.h"
#include "common/engine/engine.h"
#include "common/model/model.h"
#include "gtest/gtest.h"
#include "tests/golden/test_model.h"
#include "tests/testing/cluster_test_util.h"

namespace pdserve {
namespace {

using testing::Generate;
using testing::GenerateOutcome;
using testing::PoolsIdle;
using testing::ScrapeMetric;
using testing::StartCluster;

constexpr int kMaxTokens = 16;
const absl::Duration kTimeout = absl::Minutes(10);
constexpr char kDraftedMetric[] = "pdserve_decode_spec_draft_tokens_total{source=\"prompt_lookup\"}";
constexpr char kAcceptedMetric[] =
    "pdserve_decode_spec_accepted_tokens_total{source=\"prompt_lookup\"}";

struct ServedModel {
  std::string name;
  std::string file;
  bool chat;              // has a chat template
  int long_prompt_tokens;  // 0: no long case
};

// A prompt of `n` tokens of English text.
std::vector<int32_t> LongPrompt(const Model& model, int n) {
  std::string text;
  std::vector<int32_t> ids;
  while (ids.size() < static_cast<size_t>(n)) {
    text += "The keeper wrote the wind, the swell and every boat's name into her notebook. ";
    ids = model.tokenizer().EncodePrompt(text);
  }
  ids.resize(n);
  return ids;
}

std::vector<v1::GenerateRequest> Requests(const Model& model, const ServedModel& m) {
  std::vector<v1::GenerateRequest> out;
  out.push_back(testing::TextRequest("The capital of France is", kMaxTokens));
  out.push_back(testing::TextRequest("def fibonacci(n):\n", kMaxTokens));
  // Text that repeats itself, which speculative decoding drafts from.
  out.push_back(testing::TextRequest(
      "red, green, blue, yellow; red, green, blue, yellow; red, green, blue, yellow; red, green,",
      kMaxTokens));
  if (m.chat) out.push_back(testing::ChatRequest("Reverse a string in Python.", kMaxTokens));
  if (m.long_prompt_tokens > 0) {
    v1::GenerateRequest r;
    for (int32_t id : LongPrompt(model, m.long_prompt_tokens)) r.mutable_tokens()->add_ids(id);
    r.set_max_tokens(kMaxTokens);
    r.set_return_token_ids(true);
    out.push_back(r);
  }
  for (v1::GenerateRequest& r : out) r.set_ignore_eos(true);
  return out;
}

// Each request's greedy tokens from the engine in this process.
std::vector<std::vector<int32_t>> InProcessTokens(const Model& model,
                                                  const std::vector<v1::GenerateRequest>& reqs,
                                                  const std::string& kv_dtype = "f16") {
  CpuModelRunner runner(model.config(), &model.weights(), 2);
  auto cache = KvCache::Create(KvLayout::ForModel(model.config(), 16, kv_dtype), 512);
  EXPECT_TRUE(cache.ok());
  Engine engine(&model.tokenizer(), &runner, cache->get(), {});
  std::vector<std::vector<int32_t>> out(reqs.size());
  for (size_t k = 0; k < reqs.size(); ++k) {
    const v1::GenerateRequest& r = reqs[k];
    SequenceOptions o;
    if (r.has_tokens()) {
      o.prompt.assign(r.tokens().ids().begin(), r.tokens().ids().end());
    } else if (r.has_chat()) {
      o.prompt = model.tokenizer().EncodePrompt(
          *model.chat_template().Render({{"user", r.chat().messages(0).content()}}, true));
    } else {
      o.prompt = model.tokenizer().EncodePrompt(r.text());
    }
    o.max_tokens = r.max_tokens();
    o.ignore_eos = true;
    EXPECT_TRUE(engine.Add(o, [&out, k](const TokenEvent& e) {
                        if (e.token >= 0) out[k].push_back(e.token);
                      }).ok());
  }
  while (engine.HasWork()) EXPECT_TRUE(engine.Step().ok());
  return out;
}

class ModelServingTest : public ::testing::TestWithParam<ServedModel> {
 protected:
  void SetUp() override {
    path_ = testing::RealModelPath(GetParam().file);
    if (path_.empty()) GTEST_SKIP() << GetParam().file << " not found (scripts/fetch-model.sh)";
  }
  std::string path_;
};

TEST_P(ModelServingTest, DisaggregatedEqualsColocatedEqualsInProcess) {
  auto model = Model::Load(path_);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<v1::GenerateRequest> reqs = Requests(**model, GetParam());
  const auto want = InProcessTokens(**model, reqs);
  for (bool colocated : {false, true}) {
    LocalClusterOptions o;
    o.model = path_;
    o.colocated = colocated;
    // Speculative decoding is the decode worker's default: the tokens
    // below must be plain decode's (the in-process engine does not draft).
    o.extra_decode_flags = {"--metrics_port=-1"};
    auto cluster = StartCluster(o, GetParam().name + (colocated ? "-colocated" : "-disagg"));
    ASSERT_NE(cluster, nullptr);
    // One at a time: a long prompt queued ahead would send the others to
    // local prefill (the prefill worker refuses what it cannot start in time).
    std::vector<GenerateOutcome> outs;
    auto stub = testing::RouterStub(cluster->router_address());
    for (const v1::GenerateRequest& r : reqs) outs.push_back(Generate(*stub, r, kTimeout));
    for (size_t k = 0; k < reqs.size(); ++k) {
      ASSERT_TRUE(outs[k].status.ok()) << outs[k].status.error_message();
      EXPECT_EQ(outs[k].ids, want[k]) << "request " << k << " colocated=" << colocated;
      if (colocated) continue;
      const auto& t = outs[k].finished.timings();
      EXPECT_EQ(t.prefill_mode(), "remote");
      EXPECT_GT(t.kv_transfer_bytes(), 0u);
      // Every layer's blocks of the prompt, without the window rule.
      const KvLayout layout = KvLayout::ForModel((*model)->config(), 16);
      const int32_t n_blocks = BlocksForTokens(outs[k].finished.usage().prompt_tokens(), 16);
      const uint64_t all_layers =
          static_cast<uint64_t>(layout.n_layers) * n_blocks * layout.bytes_per_layer_block();
      uint64_t windowed = 0;
      for (int l = 0; l < layout.n_layers; ++l) {
        windowed += static_cast<uint64_t>(n_blocks - layout.FirstSentBlock(l, n_blocks)) *
                    layout.bytes_per_layer_block();
      }
      EXPECT_EQ(t.kv_transfer_bytes(), windowed) << "request " << k;
      std::cout << GetParam().name << " request " << k << ": "
                << outs[k].finished.usage().prompt_tokens() << " prompt tokens, "
                << t.kv_transfer_bytes() << " KV bytes moved (" << all_layers
                << " without the window rule)\n";
    }
    // The repeated sentences of the long prompt, at least, were drafted
    // from and kept.
    const int metrics = cluster->metrics_port("decode-0");
    EXPECT_GT(ScrapeMetric(metrics, kDraftedMetric), 0) << "colocated=" << colocated;
    EXPECT_GT(ScrapeMetric(metrics, kAcceptedMetric), 0) << "colocated=" << colocated;
    if (!GetParam().chat) {
      const GenerateOutcome refused = Generate(*stub, testing::ChatRequest("Hi", 4), kTimeout);
      EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << refused.status.error_message();
    }
    EXPECT_TRUE(PoolsIdle(*cluster, absl::Seconds(10)));
  }
}

// The int8 KV cache with windows: the long prompt's window-only transfer
// carries int8 blocks (scales inside), and the tokens are the int8 engine's.
TEST_P(ModelServingTest, Int8KvDisaggregatedEqualsInProcess) {
  if (GetParam().long_prompt_tokens == 0) GTEST_SKIP() << "no sliding window";
  auto model = Model::Load(path_);
  ASSERT_TRUE(model.ok()) << model.status();
  // Over twice the window (so most of it is not sent), shorter than the f16
  // case's to keep the sanitizer run short.
  v1::GenerateRequest r;
  for (int32_t id : LongPrompt(**model, 1200)) r.mutable_tokens()->add_ids(id);
  r.set_max_tokens(kMaxTokens);
  r.set_return_token_ids(true);
  r.set_ignore_eos(true);
  const std::vector<v1::GenerateRequest> reqs = {r};
  const auto want = InProcessTokens(**model, reqs, "int8");
  LocalClusterOptions o;
  o.model = path_;
  o.extra_worker_flags = {"--kv_dtype=int8"};
  auto cluster = StartCluster(o, GetParam().name + "-int8");
  ASSERT_NE(cluster, nullptr);
  auto stub = testing::RouterStub(cluster->router_address());
  const GenerateOutcome out = Generate(*stub, reqs[0], kTimeout);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.ids, want[0]);
  EXPECT_EQ(out.finished.timings().prefill_mode(), "remote");
  EXPECT_TRUE(PoolsIdle(*cluster, absl::Seconds(10)));
}

INSTANTIATE_TEST_SUITE_P(
    Models, ModelServingTest,
    ::testing::Values(ServedModel{"qwen2_5_coder", "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
                                  /*chat=*/true, /*long_prompt_tokens=*/0},
                      ServedModel{"gemma3", "gemma-3-270m.Q4_K_M.gguf", /*chat=*/false,
                                  /*long_prompt_tokens=*/2000}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pdserve
